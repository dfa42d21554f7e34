"""`serve --transport http` is reachable by any local process: it takes a bearer token, and a network
client's initializationOptions can never start a command or change the backends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import AGENTIFY, fake_backend, gateway_env, wait_until, write_config
from tests.integration.test_http_transport import accepting, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "http-token-0123456789abcdef"


@asynccontextmanager
async def http_gateway(config: Path, stderr: Path, *extra: str, token: str | None = TOKEN) -> AsyncIterator[int]:
    port = free_port()
    env = os.environ | gateway_env(None)
    env.pop("AGENTIFY_HTTP_TOKEN", None)
    if token:
        env["AGENTIFY_HTTP_TOKEN"] = token
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config), *extra]
    with stderr.open("w") as errlog:
        async with await anyio.open_process(
            command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog
        ) as process:
            try:
                await wait_until(lambda: accepting(port), 30)
                yield port
            finally:
                process.terminate()
                with anyio.move_on_after(15):
                    await process.wait()
                if process.returncode is None:
                    process.kill()


def post_initialize(port: int, options: dict[str, Any], token: str | None) -> int:
    """A raw `initialize` with initializationOptions, as an attacker would send it; returns the status."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "1"},
            "initializationOptions": options,
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def backend_ids(port: int, token: str) -> list[str]:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            with anyio.fail_after(30):
                await session.initialize()
                result = await session.call_tool("list_backends", {})
    return [b["id"] for b in (result.structured_content or {})["backends"]]


def attack(marker: Path) -> dict[str, Any]:
    return {"backends": [{"id": "evil", "command": "sh", "args": ["-c", f"touch {marker}"]}], "logLevel": "debug"}


async def test_requests_without_the_token_are_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    marker = tmp_path / "pwned"
    async with http_gateway(config, tmp_path / "stderr.log") as port:
        assert await anyio.to_thread.run_sync(post_initialize, port, attack(marker), None) == 401
        assert await anyio.to_thread.run_sync(post_initialize, port, attack(marker), "wrong-token") == 401
        assert await backend_ids(port, TOKEN) == ["fake"]
    assert not marker.exists()


async def test_initialization_options_over_http_never_start_a_command(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    marker = tmp_path / "pwned"
    async with http_gateway(config, tmp_path / "stderr.log") as port:
        # Even with the token, and as the very first client: only logLevel may change.
        assert await anyio.to_thread.run_sync(post_initialize, port, attack(marker), TOKEN) == 200
        assert await backend_ids(port, TOKEN) == ["fake"]
        assert await anyio.to_thread.run_sync(post_initialize, port, attack(marker), TOKEN) == 200
        assert await backend_ids(port, TOKEN) == ["fake"]
    assert not marker.exists()
    assert "may only set logLevel; ignored: backends" in (tmp_path / "stderr.log").read_text()


async def test_a_generated_token_is_shown_once_on_stderr_and_works(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    stderr = tmp_path / "stderr.log"
    async with http_gateway(config, stderr, token=None) as port:
        line = next(line for line in stderr.read_text().splitlines() if "Authorization: Bearer " in line)
        token = line.split("Authorization: Bearer ")[1].split("'")[0]
        assert len(token) >= 24
        assert await backend_ids(port, token) == ["fake"]
        assert await anyio.to_thread.run_sync(post_initialize, port, {}, None) == 401
    assert stderr.read_text().count(token) == 1


async def test_no_auth_is_allowed_on_loopback_only(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    async with http_gateway(config, tmp_path / "stderr.log", "--no-auth", token=None) as port:
        assert await anyio.to_thread.run_sync(post_initialize, port, {}, None) == 200
    with anyio.fail_after(60):
        refused = await anyio.run_process(
            [str(AGENTIFY), "serve", "--transport", "http", "--host", "0.0.0.0", "--no-auth", "--config", str(config)],
            check=False,
            stdin=subprocess.DEVNULL,
        )
    stderr = refused.stderr.decode()
    assert refused.returncode == 2
    assert "--no-auth is refused with --host 0.0.0.0" in stderr
    # Another loopback address is not guarded against DNS rebinding by the SDK: refused as well.
    with anyio.fail_after(60):
        other = await anyio.run_process(
            [
                str(AGENTIFY),
                "serve",
                "--transport",
                "http",
                "--host",
                "127.0.0.2",
                "--no-auth",
                "--config",
                str(config),
            ],
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert other.returncode == 2 and "--no-auth is refused with --host 127.0.0.2" in other.stderr.decode()
    assert "Traceback" not in stderr and refused.stdout == b""


async def test_idle_connections_cannot_lock_out_a_client_with_the_token(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    async with http_gateway(config, tmp_path / "stderr.log") as port:

        def open_idle() -> list[socket.socket]:
            return [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(300)]

        idle = await anyio.to_thread.run_sync(open_idle)
        try:
            assert await backend_ids(port, TOKEN) == ["fake"]
            # The longest-waiting idle socket was closed to make room.
            assert await anyio.to_thread.run_sync(lambda: idle[0].recv(1)) == b""
        finally:
            for sock in idle:
                sock.close()
