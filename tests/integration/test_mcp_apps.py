"""MCP Apps through the gateway, against the npm app server @modelcontextprotocol/server-basic-vanillajs:
its tool keeps `_meta.ui`, its `ui://` page is readable, and a call from inside the app, by the server's own
tool name, reaches it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.conftest import REPO, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

APP_SERVER = REPO / "node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js"
UI = "ui://get-time/mcp-app.html"


def app_backend() -> dict[str, Any]:
    if not APP_SERVER.exists():
        pytest.fail(f"{APP_SERVER} is missing: run scripts/setup.sh (npm install) first")
    return {"id": "app", "command": "node", "args": [str(APP_SERVER), "--stdio"]}


@pytest.mark.parametrize("mode", MODES)
async def test_an_app_tool_keeps_its_ui_and_the_app_calls_it_by_its_own_name(tmp_path: Path, mode: str) -> None:
    config = write_config(tmp_path, [app_backend()], expose=["tools", "search"])
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        from_ide = await client.call_tool("app__get-time", {})
        from_app = await client.call_tool("get-time", {})  # what the app's callServerTool sends
        page = await client.read_resource(UI)  # what the IDE renders
    shown = tools["app__get-time"]
    assert (shown.meta or {})["ui"] == {"resourceUri": UI} and (shown.meta or {})["ui/resourceUri"] == UI
    assert shown.output_schema is not None and shown.title == "Get Time"
    (html,) = page.contents
    assert isinstance(html, types.TextResourceContents) and html.mime_type == "text/html;profile=mcp-app"
    assert html.text.startswith("<!DOCTYPE html>")
    for result in (from_ide, from_app):
        assert not result.is_error, text_of(result)
        assert text_of(result).startswith("20") and (result.structured_content or {})["time"] == text_of(result)
