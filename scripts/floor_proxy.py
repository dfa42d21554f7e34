"""The floor for scripts/bench.py: the least an MCP pass-through proxy on the same SDK can do.

A low-level `mcp.server.Server` on stdio that holds one persistent `ClientSession` to one
backend (started as a child process over stdio) and forwards `tools/list` and `tools/call`
to it unchanged: no planning, no config, no logging, no tracing, no redaction. Whatever the
gateway costs above this is agentify's own; what this costs above a direct call is the SDK's
JSON-RPC on both sides.

It keeps the SDK's defaults, its OpenTelemetry middleware included, as the gateway must (issue 18);
with no tracer provider installed, the SDK's spans are OpenTelemetry's no-op ones. Like the
gateway, it forwards calls with `send_request`, so neither side validates results against output
schemas.

With `--http PORT` it serves streamable HTTP on 127.0.0.1 instead (uvicorn, no auth, TCP_NODELAY
as the gateway's socket has it): what the SDK's HTTP transport costs above its stdio one. With
`--pipes` it serves stdio on agentify's event-loop transport (`mcp_server/stdio_pipes.py`) instead of
the SDK's threads, as the gateway does on pipes: what the gateway's own work costs, the transport
being the same.

Usage: python scripts/floor_proxy.py [--http PORT | --pipes] COMMAND [ARG...]   (the backend to forward to)
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server


def build_proxy(backend: StdioServerParameters) -> Server[ClientSession]:
    @asynccontextmanager
    async def lifespan(_: Server[ClientSession]) -> AsyncIterator[ClientSession]:
        with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - instant, and errlog needs a real file
            async with stdio_client(backend, errlog=devnull) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session

    async def list_tools(
        ctx: ServerRequestContext[ClientSession], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await ctx.lifespan_context.send_request(types.ListToolsRequest(params=params), types.ListToolsResult)

    async def call_tool(
        ctx: ServerRequestContext[ClientSession], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await ctx.lifespan_context.send_request(types.CallToolRequest(params=params), types.CallToolResult)

    return Server("floor-proxy", version="0", lifespan=lifespan, on_list_tools=list_tools, on_call_tool=call_tool)


async def main(command: str, args: list[str], http_port: int | None, pipes: bool) -> None:
    server = build_proxy(StdioServerParameters(command=command, args=args))
    if http_port is not None:
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1", streamable_http_path="/mcp")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", http_port))
        sock.listen(64)
        await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[sock])
        return
    if pipes:
        from agentify.mcp_server.stdio_pipes import pipe_stdio

        async with pipe_stdio() as streams:
            if streams is None:
                sys.exit("floor_proxy.py --pipes: stdin and stdout must be pipes")
            await server.run(*streams, server.create_initialization_options(NotificationOptions()))
        return
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options(NotificationOptions()))


if __name__ == "__main__":
    argv = sys.argv[1:]
    port = int(argv[1]) if argv[:1] == ["--http"] and len(argv) > 1 else None
    argv = argv[2:] if port is not None else argv
    on_pipes = argv[:1] == ["--pipes"]
    argv = argv[1:] if on_pipes else argv
    if not argv:
        sys.exit("usage: floor_proxy.py [--http PORT | --pipes] COMMAND [ARG...]  (the backend to forward to)")
    anyio.run(main, argv[0], argv[1:], port, on_pipes)
