"""`Mcp-Param-*` headers of 2026-07-28 calls over HTTP (`mcp_server/param_headers.py`): compared with the
arguments of a listed backend tool that marks one; nothing to compare for the gateway's own tools."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import fake_backend, write_config
from tests.integration.team import http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "param-headers-token-0123456789"
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


def _call(url: str, name: str, arguments: dict[str, Any], text_header: str) -> tuple[int, dict[str, Any]]:
    """A raw 2026-07-28 `tools/call` carrying `Mcp-Param-Text: <text_header>`: its status and JSON body."""
    params = {"name": name, "arguments": arguments, "_meta": MODERN}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {TOKEN}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        "Mcp-Param-Text": text_header,
    }
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers, method="POST"), timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


async def test_a_listed_backend_tool_refuses_a_header_its_arguments_contradict(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake", "--param-header")], expose=["tools"])
    async with http_gateway(config, tmp_path / "gateway.err", {"AGENTIFY_HTTP_TOKEN": TOKEN}) as served:
        status, body = await anyio.to_thread.run_sync(_call, served.url, "fake__echo", {"text": "hello"}, "forged")
        assert status == 400, body
        assert body["error"]["code"] == -32020 and "Mcp-Param-Text" in body["error"]["message"]
        status, body = await anyio.to_thread.run_sync(_call, served.url, "fake__echo", {"text": "same"}, "same")
    assert status == 200 and body["result"]["content"][0]["text"] == "echo: same", body


async def test_the_gateways_own_tools_mark_no_argument_so_no_header_is_compared(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake", "--param-header")], expose=["search"])
    call = {"name": "fake__echo", "arguments": {"text": "hello"}}
    async with http_gateway(config, tmp_path / "gateway.err", {"AGENTIFY_HTTP_TOKEN": TOKEN}) as served:
        status, body = await anyio.to_thread.run_sync(_call, served.url, "call_tool", call, "forged")
    assert status == 200, body
    assert "echo: hello" in json.dumps(body["result"]["content"])
