"""A backend whose tools come from a JSON file the test edits: `[{"name": ..., "description": ...}]`,
read again at every tools/list. Each such tool answers `<name> ran with <text>`; one whose entry has
"seconds" waits that long first, after appending `<name> began` to TOOLS_FILE.calls. The fixed tool
`refresh` announces that the tools changed (`notifications/tools/list_changed` to a 2025-11-25
gateway, the listen stream to a 2026-07-28 one), as a server that updates itself while serving does.

Usage: pinned_backend.py TOOLS_FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def main() -> None:
    source = Path(sys.argv[1])
    changes = InMemorySubscriptionBus()

    def listed() -> list[types.Tool]:
        entries = json.loads(source.read_text())
        tools = [types.Tool(name=e["name"], description=e["description"], input_schema=SCHEMA) for e in entries]
        refresh = types.Tool(name="refresh", description="Announce that the tools changed", input_schema=SCHEMA)
        return [*tools, refresh]

    def began(name: str) -> float | None:
        """The seconds the tool `name` waits (None: none), once its start is written down."""
        entry = next((e for e in json.loads(source.read_text()) if e["name"] == name), {})
        if "seconds" not in entry:
            return None
        with source.with_suffix(".calls").open("a") as calls:
            calls.write(f"{name} began\n")
        return float(entry["seconds"])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "refresh":
            await ctx.session.send_tool_list_changed()  # 2025-11-25 sessions
            await changes.publish(ToolsListChanged())  # 2026-07-28 sessions, which listen
            return types.CallToolResult(content=[types.TextContent(type="text", text="announced")])
        if (seconds := began(params.name)) is not None:
            await anyio.sleep(seconds)
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran with {text}")])

    server = Server(
        "pinned-backend",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(changes),
    )

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
