"""A team of replicas as `scripts/team.sh` starts it: Redis, replicas and HAProxy on 127.0.0.1, each
process known by the pid the script reports, so tests can stop one replica and check that none is left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import anyio
import anyio.abc

from tests.conftest import AGENTIFY, REPO, gateway_env
from tests.servers import free_port

TEAM_SH = REPO / "scripts" / "team.sh"
READY = re.compile(rb"team gateway ready at (http://127\.0\.0\.1:\d+/mcp)\n")
STARTED = re.compile(r"team: (\w+)(?: (\d+))? at (\S+) pid (\d+)")


@dataclass
class Team:
    url: str
    process: anyio.abc.Process
    logs: Path
    replicas: dict[int, str] = field(default_factory=dict)
    """pid -> the replica's own URL (without HAProxy)."""
    others: dict[str, int] = field(default_factory=dict)
    """"redis" and "haproxy" -> pid."""

    def pids(self) -> list[int]:
        return [*self.replicas, *self.others.values()]

    def log(self, name: str = "team.err") -> str:
        path = self.logs / name
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped yet by its parent) is gone as far as a client can tell
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


@asynccontextmanager
async def team(config: Path, logs: Path, replicas: int = 3, env: dict[str, str] | None = None) -> AsyncIterator[Team]:
    """`scripts/team.sh` serving; SIGTERM (then SIGKILL) by its pid on the way out."""
    full_env = os.environ | gateway_env(
        None,
        AGENTIFY_CACHE_DIR=str(logs / "cache"),
        AGENTIFY_STATE_DIR=str(logs / "state"),
        AGENTIFY_BIN=str(AGENTIFY),
        AGENTIFY_TEAM_READY_SECONDS="280",
    )
    command = ["bash", str(TEAM_SH), "--replicas", str(replicas), "--port", str(free_port())]
    command += ["--config", str(config), "--logs", str(logs)]
    with _log_file(logs) as errors:
        process = await anyio.open_process(command, env=full_env | (env or {}), stdin=subprocess.DEVNULL, stderr=errors)
    async with process:
        try:
            url = await _ready_url(process, logs)
            member = Team(url, process, logs)
            for kind, _, where, pid in STARTED.findall(member.log()):
                if kind == "replica":
                    member.replicas[int(pid)] = where
                else:
                    member.others[kind] = int(pid)
            assert len(member.replicas) == replicas and set(member.others) == {"redis", "haproxy"}, member.log()
            yield member
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(60):
                    await process.wait()
            if process.returncode is None:
                process.kill()


def _log_file(logs: Path) -> BinaryIO:
    logs.mkdir(parents=True, exist_ok=True)
    return (logs / "team.err").open("ab")


async def _ready_url(process: anyio.abc.Process, logs: Path) -> str:
    assert process.stdout is not None
    seen = b""
    with anyio.fail_after(300):  # three replicas start at once; on a loaded machine each may take minutes
        async for chunk in process.stdout:
            seen += chunk
            found = READY.search(seen)
            if found:
                return found.group(1).decode()
    raise AssertionError(f"team.sh ended before it was ready: {seen!r}\n{(logs / 'team.err').read_text()[-4000:]}")
