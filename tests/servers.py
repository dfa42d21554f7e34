"""Real remote MCP servers for tests, on 127.0.0.1: server-everything (streamable HTTP, SSE) and our own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import anyio.abc

from tests.conftest import REPO

EVERYTHING = REPO / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
HTTP_BACKEND = REPO / "tests/fakes/http_backend.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepting(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def wait_accepting(port: int, seconds: float = 20.0) -> None:
    with anyio.fail_after(seconds):
        while not accepting(port):  # noqa: ASYNC110 - the server is another process
            await anyio.sleep(0.05)


@contextmanager
def server_process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ | (env or {}), start_new_session=True
        )
    try:
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 9)
    process.wait(10)


async def stop_gateway(process: anyio.abc.Process, patience: float = 3.0) -> None:
    """Stops an `agentify serve --transport http` by pid as an orchestrator does: SIGTERM, which drains; after
    `patience`, a second SIGTERM, which stops at once (a session a test left open would hold the drain for
    `drainSeconds`); SIGKILL only if that fails too."""
    for wait in (patience, 15.0):
        if process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(wait):
            await process.wait()
    if process.returncode is None:
        process.kill()


def stop_gateway_now(process: subprocess.Popen[bytes], patience: float = 3.0) -> None:
    """`stop_gateway` for a process started with Popen."""
    for wait in (patience, 15.0):
        if process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            pass
    if process.poll() is None:
        process.kill()
        process.wait(10)


def everything(mode: str) -> list[str]:
    """argv of server-everything in `streamableHttp` or `sse` mode (it listens on $PORT)."""
    if not EVERYTHING.exists():
        raise RuntimeError(f"{EVERYTHING} is missing: run scripts/setup.sh (npm install) first")
    return ["node", str(EVERYTHING), mode]


def http_backend(port: int, *flags: str) -> list[str]:
    return [sys.executable, str(HTTP_BACKEND), "--port", str(port), *flags]


class RedisServer:
    """Debian's redis-server on a free port of 127.0.0.1, nothing persisted; stopped by pid."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._directory = directory
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self._directory)]
        with (self._directory / "redis.log").open("ab") as out:
            self._process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(400):  # bounded: 20 s; waiting on the process notices at once when it exits
            if accepting(self.port):
                return self
            try:
                self._process.wait(0.05)
                break
            except subprocess.TimeoutExpired:
                continue
        raise RuntimeError(f"redis-server did not start: {(self._directory / 'redis.log').read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        assert self._process is not None, "redis-server is not running"
        return self._process.pid

    def stop(self) -> None:
        if self._process is not None:
            stop(self._process)
            self._process = None
