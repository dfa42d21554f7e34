"""A remote MCP backend of our own, on the SDK's MCPServer: streamable HTTP (or SSE only), on 127.0.0.1.

It can demand a bearer token and records the headers of every request it receives, one JSON
object a line, so tests assert on what reached the server.

    python http_backend.py --port N [--headers-log FILE] [--sse-only] [--marker FILE]
    env HTTP_BACKEND_TOKEN: when set, requests without `Authorization: Bearer <it>` get 401.

The tool lock_out(status) is hostile: every POST after it is refused with that HTTP status
(a revoked credential or permission), while an open SSE stream stays open.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--headers-log")
    parser.add_argument("--sse-only", action="store_true", help="serve the old SSE transport at /events only")
    parser.add_argument("--marker", help="append 'started <pid>' here once serving")
    args = parser.parse_args()
    token = os.environ.get("HTTP_BACKEND_TOKEN")
    locked_out: list[int] = []  # the status every POST gets from now on, once lock_out was called

    server = MCPServer("http-fake", version="1.0")

    @server.tool(description="Echo the text back")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two numbers")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Refuse every later POST with this HTTP status")
    def lock_out(status: int) -> str:
        locked_out.append(status)
        return f"locked out with {status}"

    if args.sse_only:
        app = server.sse_app(sse_path="/events", message_path="/messages/")
    else:
        app = server.streamable_http_app(streamable_http_path="/mcp")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            if args.headers_log:
                _append(args.headers_log, json.dumps({"method": scope["method"], "headers": headers}))
            refused = 401 if token and headers.get("authorization") != f"Bearer {token}" else None
            if locked_out and scope["method"] == "POST":
                refused = locked_out[-1]
            if refused is not None:
                plain = [(b"content-type", b"text/plain")]
                await send({"type": "http.response.start", "status": refused, "headers": plain})
                await send({"type": "http.response.body", "body": b"refused"})
                return
        await app(scope, receive, send)

    if args.marker:
        with open(args.marker, "a", encoding="utf-8") as handle:
            handle.write(f"started {os.getpid()}\n")
    uvicorn.run(guarded, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


if __name__ == "__main__":
    main()
