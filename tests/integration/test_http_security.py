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
from tests.servers import stop_gateway

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
                await stop_gateway(process)


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
    assert "initializationOptions over HTTP change nothing; ignored: backends" in (tmp_path / "stderr.log").read_text()


async def test_a_generated_token_is_shown_once_on_stderr_and_works(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    stderr = tmp_path / "stderr.log"
    async with http_gateway(config, stderr, token=None) as port:
        # The socket listens before the gateway is built (a busy port fails first), so the line can come after.
        await wait_until(lambda: "Authorization: Bearer " in stderr.read_text(), 30)
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


def raw_exchange(port: int, request: bytes, seconds: float = 30) -> bytes:
    """Sends `request` as it is and reads until the server closes or has answered a head and its body."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and answer.split(b"\r\n\r\n", 1)[1]:
                break
    return answer


async def test_a_client_cannot_change_the_log_level_nor_forge_log_lines_over_http(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    stderr = tmp_path / "stderr.log"
    forged = "12:00:00.000 | INFO    | agentify.gateway | FORGED"
    options = {"logLevel": "CRITICAL", f"x\n{forged}": 1}
    async with http_gateway(config, stderr) as port:
        assert await anyio.to_thread.run_sync(post_initialize, port, options, TOKEN) == 200
        echoed = await call_tool(port, TOKEN, "call_tool", {"name": "fake__echo", "arguments": {"text": "hi"}})
        assert echoed == "echo: hi"
    lines = stderr.read_text().splitlines()
    assert not any(line.startswith(forged) for line in lines)
    ignored = next(n for n, line in enumerate(lines) if "change nothing; ignored: logLevel, x\\n12:00:00.000" in line)
    # The gateway logs at its own level after the client asked for CRITICAL: the call is in the log.
    assert any("plan: fake.echo" in line for line in lines[ignored:])


async def call_tool(port: int, token: str, name: str, arguments: dict[str, Any]) -> str:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            with anyio.fail_after(30):
                await session.initialize()
                result = await session.call_tool(name, arguments)
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_a_short_token_is_refused_beyond_loopback(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    command = [str(AGENTIFY), "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())]
    env = os.environ | {"AGENTIFY_HTTP_TOKEN": "short-token"}
    with anyio.fail_after(60):
        refused = await anyio.run_process([*command, "--config", str(config)], env=env, check=False)
    assert refused.returncode == 2
    assert (
        "AGENTIFY_HTTP_TOKEN is 11 characters long" in refused.stderr.decode()
        and "at least 16" in refused.stderr.decode()
    )


async def test_repeated_wrong_tokens_back_off_their_address(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    async with http_gateway(config, tmp_path / "stderr.log") as port:
        statuses = [await anyio.to_thread.run_sync(post_initialize, port, {}, f"guess-{n}") for n in range(6)]
        # Backing off, the address is refused any token that does not verify, and is told how long; the right
        # token still gets in (others may share the address: a NAT, a VPN).
        answer = await anyio.to_thread.run_sync(raw_exchange, port, mcp_post("guess-again"))
        valid = await anyio.to_thread.run_sync(raw_exchange, port, mcp_post(TOKEN))
    assert statuses == [401] * 5 + [429]
    head = answer.split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 429") and b"retry-after: " in head
    assert not valid.lower().startswith(b"http/1.1 429") and not valid.lower().startswith(b"http/1.1 401")


def mcp_post(token: str, body: bytes = b"{}", length: int | None = None) -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(body) if length is None else length}\r\n\r\n".encode()
        + body
    )


async def test_a_request_body_that_never_arrives_whole_gets_408(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    async with http_gateway(config, tmp_path / "stderr.log") as port:
        with anyio.fail_after(30):
            answer = await anyio.to_thread.run_sync(raw_exchange, port, mcp_post(TOKEN, b'{"jsonrpc": ', 400))
        assert await backend_ids(port, TOKEN) == ["fake"]
    assert answer.startswith(b"HTTP/1.1 408")


async def test_a_websocket_upgrade_gets_a_clean_refusal(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")])
    stderr = tmp_path / "stderr.log"
    upgrade = (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    )
    async with http_gateway(config, stderr) as port:
        without = await anyio.to_thread.run_sync(raw_exchange, port, upgrade + b"\r\n")
        with_token = await anyio.to_thread.run_sync(
            raw_exchange, port, upgrade + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        assert await backend_ids(port, TOKEN) == ["fake"]
    for answer in (without, with_token):
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert "Traceback" not in stderr.read_text()
