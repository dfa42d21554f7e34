"""The team gateway as people use it: `agentify serve --transport http` as a subprocess, people's tokens
made with `agentify token add`, and the official clients (and raw HTTP) with those tokens."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.conftest import AGENTIFY, gateway_env, wait_until
from tests.integration.ide_client import ERAS, ask_for_logs, era_of, logging_options
from tests.servers import free_port, stop_gateway


@dataclass
class HttpGateway:
    port: int
    process: anyio.abc.Process
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def at(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


@asynccontextmanager
async def http_gateway(
    config: Path, stderr: Path, env: dict[str, str] | None = None, port: int | None = None
) -> AsyncIterator[HttpGateway]:
    """Serving once `/healthz` answers; stopped (SIGTERM, then SIGKILL) by pid on the way out."""
    port = port or free_port()
    dirs = {"AGENTIFY_CACHE_DIR": str(stderr.parent / "cache"), "AGENTIFY_STATE_DIR": str(stderr.parent / "state")}
    full_env = os.environ | gateway_env(None, **dirs) | (env or {})
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    with stderr.open("a") as errlog:
        async with await anyio.open_process(
            command, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog
        ) as process:
            gateway = HttpGateway(port, process, stderr)
            try:
                await wait_until(lambda: _healthy(gateway) or process.returncode is not None, 60)
                assert process.returncode is None, gateway.log()[-3000:]
                yield gateway
            finally:
                await stop_gateway(process)


def _healthy(gateway: HttpGateway) -> bool:
    try:
        return request("GET", gateway.at("/healthz")).status == 200
    except OSError:
        return False


def request(
    method: str,
    url: str,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    timeout: float = 30,
    session: str | None = None,
) -> Answer:
    """One plain HTTP request (blocking: run it in a thread from async tests); `session`: a 2025-11-25 session's
    id, with the protocol version header that goes with it."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=timeout) as r:
            return Answer(r.status, dict(r.headers), _json(r.read()))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, dict(exc.headers), _json(exc.read()))


def initialize(url: str, token: str | None) -> Answer:
    """A 2025-11-25 `initialize`, the first request of a new client."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    return request("POST", url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw.decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


@asynccontextmanager
async def http_client(
    url: str,
    token: str | None,
    mode: str = "legacy",
    on_request: Callable[[httpx2.Request], Awaitable[None]] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """The SDK's `Client` over streamable HTTP with `token`, in the era `mode` names (with a log level when
    it ends in `+logs`); `on_request` hears every HTTP request it sends."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated in 2026-07-28
        async with create_mcp_http_client(headers=headers) as http:
            if on_request is not None:
                http.event_hooks = {"request": [on_request], "response": []}
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=era_of(mode), **logging_options(mode, options)) as client:
                assert client.protocol_version == ERAS[era_of(mode)], client.protocol_version
                await ask_for_logs(client, mode)
                yield client


async def add_token(tokens_file: Path, name: str, *scopes: str, groups: tuple[str, ...] = ()) -> str:
    """`agentify token add NAME --file F [--scope S] [--group G]`: the token it prints once on stdout."""
    scope_flags = [flag for scope in scopes for flag in ("--scope", scope)]
    scope_flags += [flag for group in groups for flag in ("--group", group)]
    with anyio.fail_after(180):  # a cold Python start: over a minute on a machine at load 20
        done = await anyio.run_process(
            [str(AGENTIFY), "token", "add", name, "--file", str(tokens_file), *scope_flags],
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


async def token_command(*args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process([str(AGENTIFY), "token", *args], check=False, stdin=subprocess.DEVNULL)


def traces_of(trace_file: Path) -> list[dict[str, Any]]:
    if not trace_file.exists():
        return []
    return [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]
