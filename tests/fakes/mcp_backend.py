"""A small MCP backend for behaviours the real servers cannot be made to show on demand.

Flags: --hang-initialize (never answers initialize), --exit-at-start (exits at once with
code 3), --marker FILE (records events: "started <pid>", "slow <seconds>" and "parent <ppid> runs
slow" when slow begins, "cancelled slow"). Tools: echo, slow(seconds) reporting progress, crash (exits mid-call),
flood_stderr(bytes), nested(code) whose schema has catastrophic regexes (`pattern`,
`patternProperties`), progress(count, message, env?) sending `count` progress notifications as
fast as it can (the message with the value of the environment variable `env` appended),
show_meta (the request's `_meta` as JSON: what a tracing backend would continue),
huge_answer(mib) writing its answer as one line of `mib` MiB with the id last (as TypeScript
servers order it) straight onto stdout, then a small one the gateway no longer waits for,
parent (the pid of the process that started it: which gateway replica), env_digest(name) (the sha256 of the
environment variable `name`, never its value, and this process's pid),
log(count, level, message, env?, logger?) sending `count` log messages during the call (at or above the
level `logging/setLevel` set, on a 2025-11-25 session), log_level (the level set, or "unset"), and
log_later(entries: [[level, text], ...]) sending those log messages a moment after the call returned.
--one-at-a-time serves one call at a time, as many stdio servers do.
--resources PREFIX offers resources: it lists PREFIX/doc, reads any URI as "PREFIX reads <uri>", and adds the
tool link(uri), whose result links to that URI (what a hostile backend's tool may do with another's URI). A URI
ending in /slow/<seconds> is read that many seconds late (marked "parent <ppid> reads slowly" as it begins and
"cancelled read" when cancelled).
--forecast adds tools whose required arguments a task often does not say: forecast(city, units: celsius or
fahrenheit, days?: integer), stock_quote(symbol, api_key), whose key is a credential, and bank_balance(account, code),
whose code is one by its title alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated in 2026-07-28, still in use


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang-initialize", action="store_true")
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--marker")
    parser.add_argument("--refuse-if", help="exit at start (code 3) while this file exists")
    parser.add_argument("--spawn-child", action="store_true", help="start a grandchild that outlives nothing")
    parser.add_argument("--one-at-a-time", action="store_true", help="serve one call at a time")
    parser.add_argument("--resources", help="list PREFIX/doc, read any URI, and offer the tool link(uri)")
    parser.add_argument("--param-header", action="store_true", help="echo's text is mirrored in Mcp-Param-Text")
    parser.add_argument("--forecast", action="store_true", help="offer forecast and stock_quote")
    args = parser.parse_args()

    def mark(event: str) -> None:
        if args.marker:
            with open(args.marker, "a", encoding="utf-8") as handle:
                handle.write(event + "\n")

    print("fake backend starting", file=sys.stderr, flush=True)
    if args.exit_at_start or (args.refuse_if and os.path.exists(args.refuse_if)):
        print("fatal: cannot open the database", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.hang_initialize:
        time.sleep(3600)
    mark(f"started {os.getpid()} {os.getppid()}")
    if args.spawn_child:
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
        mark(f"child {child.pid}")
    extra_tools: list[types.Tool] = []
    changes = InMemorySubscriptionBus()
    wire_fd = os.dup(1)  # the SDK diverts fd 1 while serving; keep the real stdout for garbage_stdout

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        if args.param_header:  # 2026-07-28 clients send the value in a header too, which servers compare
            schema["properties"]["text"]["x-mcp-header"] = "Text"
        slow = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
        empty = {"type": "object"}
        flood = {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}
        hostile = {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^(a|a)+$"}, "tags": {"type": "object"}},
            "patternProperties": {"^(b|b)+$": {"type": "string"}},
            "additionalProperties": False,
        }
        progress = {
            "type": "object",
            "properties": {"count": {"type": "integer"}, "message": {"type": "string"}, "env": {"type": "string"}},
            "required": ["count", "message"],
        }
        huge = {"type": "object", "properties": {"mib": {"type": "integer"}}, "required": ["mib"]}
        log = {
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "level": {"type": "string"},
                "message": {"type": "string"},
                "env": {"type": "string"},
                "logger": {"type": "string"},
            },
            "required": ["count", "level", "message"],
        }
        later = {"type": "object", "properties": {"entries": {"type": "array"}}, "required": ["entries"]}
        variable = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        uri = {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="echo", description="Echo the text back", input_schema=schema),
                types.Tool(name="slow", description="Wait some seconds, reporting progress", input_schema=slow),
                types.Tool(
                    name="crash", description="Exit the process during the call", input_schema={"type": "object"}
                ),
                types.Tool(name="flood_stderr", description="Write bytes to stderr", input_schema=flood),
                types.Tool(
                    name="grow", description="Add a tool and announce the change", input_schema={"type": "object"}
                ),
                types.Tool(name="big", description="Return a large text", input_schema=flood),
                types.Tool(name="garbage_stdout", description="Write a non-JSON line on stdout", input_schema=empty),
                types.Tool(name="show_meta", description="Show the request's _meta", input_schema=empty),
                types.Tool(name="parent", description="The pid of the process that started it", input_schema=empty),
                types.Tool(name="env_digest", description="The digest of a variable", input_schema=variable),
                types.Tool(name="nested", description="Check a code against a slow pattern", input_schema=hostile),
                types.Tool(name="progress", description="Report progress many times", input_schema=progress),
                types.Tool(name="huge_answer", description="Answer with one huge message", input_schema=huge),
                types.Tool(name="log", description="Send log messages during the call", input_schema=log),
                types.Tool(name="log_level", description="Say the level logging/setLevel set", input_schema=empty),
                types.Tool(name="log_later", description="Send log messages after the call", input_schema=later),
                *extra_tools,
                *([types.Tool(name="link", description="Link to a URI", input_schema=uri)] if args.resources else []),
                *(forecast_tools() if args.forecast else []),
            ]
        )

    one_at_a_time = anyio.Lock()
    log_level: list[str] = []  # what logging/setLevel set last (2025-11-25 sessions)
    background: list[anyio.abc.TaskGroup] = []

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        log_level[:] = [params.level]
        return types.EmptyResult()

    def logged(level: str) -> bool:
        return not log_level or LEVELS.index(level) >= LEVELS.index(log_level[0])

    async def log_after(session: Any, entries: list[list[str]]) -> None:
        await anyio.sleep(0.2)
        for level, text in entries:
            if logged(level):
                await session.send_log_message(level, text)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not args.one_at_a_time:
            return await serve_call(ctx, params)
        async with one_at_a_time:
            return await serve_call(ctx, params)

    async def serve_call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == "parent":
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(os.getppid()))])
        if params.name == "env_digest":
            value = os.environ.get(arguments["name"], "")
            digest = hashlib.sha256(value.encode()).hexdigest() if value else "unset"
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"{digest} {os.getpid()}")])
        if params.name == "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="echo: " + arguments["text"])],
                structured_content={"echoed": arguments["text"]},
            )
        if params.name == "slow":
            seconds = float(arguments["seconds"])
            mark(f"slow {seconds:g}")
            mark(f"parent {os.getppid()} runs slow")  # which replica of a team runs it
            try:
                steps = 10
                for step in range(steps):
                    await ctx.session.report_progress(step + 1, steps, f"step {step + 1}")
                    await anyio.sleep(seconds / steps)
            except anyio.get_cancelled_exc_class():
                mark("cancelled slow")
                raise
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"slept {seconds}")])
        if params.name == "show_meta":
            meta = json.dumps(params.meta or {})
            return types.CallToolResult(content=[types.TextContent(type="text", text=meta)])
        if params.name == "nested":
            return types.CallToolResult(content=[types.TextContent(type="text", text="code accepted")])
        if params.name == "progress":
            count = int(arguments["count"])
            message = arguments["message"] + os.environ.get(arguments.get("env") or "", "")
            for step in range(count):
                await ctx.session.report_progress(step + 1, count, message)
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"reported {count}")])
        if params.name == "log":
            message = arguments["message"] + os.environ.get(arguments.get("env") or "", "")
            level = arguments["level"]
            for _ in range(int(arguments["count"]) if logged(level) else 0):
                await ctx.session.send_log_message(
                    level, message, logger=arguments.get("logger"), related_request_id=ctx.request_id
                )
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"logged {arguments['count']}")])
        if params.name == "log_level":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=log_level[0] if log_level else "unset")]
            )
        if params.name == "log_later":
            background[0].start_soon(log_after, ctx.session, arguments["entries"])
            return types.CallToolResult(content=[types.TextContent(type="text", text="logging soon")])
        if params.name == "crash":
            os._exit(7)
        if params.name == "big":
            return types.CallToolResult(content=[types.TextContent(type="text", text="b" * int(arguments["bytes"]))])
        if params.name == "huge_answer":
            chunk = b"b" * (1 << 20)
            os.write(wire_fd, b'{"result":{"content":[{"type":"text","text":"')
            for _ in range(int(arguments["mib"])):
                await anyio.to_thread.run_sync(os.write, wire_fd, chunk)  # a pipe takes what it can
            os.write(wire_fd, b'"}]},"jsonrpc":"2.0","id":' + json.dumps(ctx.request_id).encode() + b"}\n")
            return types.CallToolResult(content=[types.TextContent(type="text", text="answered twice")])
        if params.name == "garbage_stdout":
            os.write(wire_fd, b"this is not json {{{\n")
            return types.CallToolResult(content=[types.TextContent(type="text", text="wrote garbage")])
        if params.name == "grow":
            extra_tools.append(types.Tool(name=f"grown{len(extra_tools)}", input_schema={"type": "object"}))
            await ctx.session.send_tool_list_changed()  # 2025-11-25 clients
            await changes.publish(ToolsListChanged())  # 2026-07-28 clients, which listen
            return types.CallToolResult(content=[types.TextContent(type="text", text="grown")])
        if params.name == "forecast" and args.forecast:
            city, units, days = arguments["city"], arguments["units"], arguments.get("days", 1)
            text = f"forecast for {city} in {units} for {days} days: sunny"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        if params.name in ("stock_quote", "bank_balance") and args.forecast:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"{arguments['symbol']}: 42")])
        if params.name == "link" and args.resources:
            link = types.ResourceLink(type="resource_link", uri=arguments["uri"], name="linked")
            return types.CallToolResult(content=[link])
        if params.name == "flood_stderr":
            chunk = "x" * 99 + "\n"
            for _ in range(int(arguments["bytes"]) // 100):
                sys.stderr.write(chunk)
            sys.stderr.flush()
            return types.CallToolResult(content=[types.TextContent(type="text", text="flooded")])
        return types.CallToolResult(content=[types.TextContent(type="text", text="unknown tool")], is_error=True)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=f"{args.resources}/doc", name="doc")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        text = f"{args.resources} reads {params.uri}"
        _, slow, seconds = str(params.uri).rpartition("/slow/")
        if slow:
            mark(f"parent {os.getppid()} reads slowly")
            try:
                await anyio.sleep(float(seconds))
            except anyio.get_cancelled_exc_class():
                mark("cancelled read")
                raise
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=str(params.uri), text=text)])

    resources: dict[str, Any] = (
        {"on_list_resources": list_resources, "on_read_resource": read_resource} if args.resources else {}
    )
    server = Server(
        "fake-backend",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(changes),
        on_set_logging_level=set_level,
        **resources,
    )

    async def run() -> None:
        async with stdio_server() as (read, write), anyio.create_task_group() as tg:
            background.append(tg)
            await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()

    anyio.run(run)


def forecast_tools() -> list[types.Tool]:
    city = {"type": "string", "description": "The city to forecast, such as Paris"}
    units = {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature units"}
    days = {"type": "integer", "minimum": 1, "maximum": 7, "description": "How many days ahead"}
    properties = {"city": city, "units": units, "days": days}
    forecast = {"type": "object", "properties": properties, "required": ["city", "units"]}
    key = {"type": "string", "description": "Your API key for the quotes service"}
    symbol = {"type": "string", "description": "The ticker symbol"}
    quote = {"type": "object", "properties": {"symbol": symbol, "api_key": key}, "required": ["symbol", "api_key"]}
    account = {"type": "string", "description": "The account number"}
    code = {"type": "string", "title": "One-time code", "description": "Sent to your phone"}  # says so by its title
    balance = {"type": "object", "properties": {"account": account, "code": code}, "required": ["account", "code"]}
    return [
        types.Tool(name="forecast", description="Get the weather forecast of a city", input_schema=forecast),
        types.Tool(name="stock_quote", description="Get the latest stock quote of a ticker symbol", input_schema=quote),
        types.Tool(name="bank_balance", description="Get the balance of a bank account", input_schema=balance),
    ]


if __name__ == "__main__":
    main()
