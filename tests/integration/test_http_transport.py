"""`agentify serve --transport http`: the same gateway over MCP streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import AGENTIFY, fake_backend, gateway_env, pid_alive, text_of, wait_until, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


async def test_http_transport_serves_tasks_and_sigterm_closes_backends(tmp_path: Path, model: ModelServer) -> None:
    port = free_port()
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), "--spawn-child")])
    env = os.environ | gateway_env(model, AGENTIFY_HTTP_TOKEN="test-token-123456")
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    async with await anyio.open_process(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        try:
            await wait_until(lambda: accepting(port), 30)
            client = create_mcp_http_client(headers={"Authorization": "Bearer test-token-123456"})
            async with client, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (r, w):
                async with ClientSession(r, w) as session:
                    with anyio.fail_after(30):
                        await session.initialize()
                        model.push(Reply.tool_call("fake__echo", {"text": "over http"}))
                        result = await session.call_tool("orchestrate_task", {"query": "echo over http"})
            assert text_of(result) == "echo: over http"
            lines = marker.read_text().splitlines()
            backend_pid = int(lines[0].split()[1])
            child_pid = int(next(line for line in lines if line.startswith("child ")).split()[1])
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                # uvicorn shuts the app down gracefully, then re-raises SIGTERM on itself.
                assert await process.wait() in (0, -signal.SIGTERM)
            # The backend's own child is only ever stopped by the gateway's process-group cleanup.
            await wait_until(lambda: not pid_alive(backend_pid) and not pid_alive(child_pid))
        finally:
            if process.returncode is None:
                process.kill()
