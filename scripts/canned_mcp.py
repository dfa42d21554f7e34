"""For scripts/bench_http.py: an MCP server that does no work, to measure what a client's own transport costs.

It answers `initialize`, `tools/list` and `tools/call` with fixed results, built once, and holds no SDK,
no validation and no session state. Both transports are bare asyncio protocols, so the server side costs
the same on each: over stdio one line in, one line out; over HTTP (`--http PORT`) a TCP_NODELAY socket
that reads one keep-alive request at a time and answers it with one JSON body (`Mcp-Session-Id` on
`initialize`, 202 for a notification, 405 for the GET stream, 411 for a body without `Content-Length`).
Whatever a client's call takes against it, over either transport, is the client's own transport and
the kernel's; the difference between the two is what any MCP server over HTTP adds to that client's
calls at the least, however cheaply it served HTTP.

Usage: python scripts/canned_mcp.py [--http PORT]
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

_TEXT = "benchmark file\n"
_RESULTS: dict[str, Any] = {
    "initialize": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "canned", "version": "0"},
    },
    "tools/list": {"tools": [{"name": "read_text_file", "inputSchema": {"type": "object"}}]},
    "tools/call": {"content": [{"type": "text", "text": _TEXT}], "isError": False},
    "ping": {},
}


def answer(body: bytes) -> bytes | None:
    """The JSON-RPC answer to one message, or None for a notification or an answer."""
    message = json.loads(body)
    if "id" not in message or "method" not in message:
        return None
    if (result := _RESULTS.get(message["method"])) is None:
        reply: dict[str, Any] = {"code": -32601, "message": f"no method {message['method']}"}
        return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": reply}).encode()
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()


class _Lines(asyncio.Protocol):
    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self.out = out
        self.done = done
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        replies = [reply + b"\n" for line in lines if line.strip() and (reply := answer(line)) is not None]
        if replies:
            self.out.write(b"".join(replies))

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(None)


async def serve_stdio() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    done: asyncio.Future[None] = loop.create_future()
    await loop.connect_read_pipe(lambda: _Lines(out, done), sys.stdin)
    await done  # stdin ended


class _Http(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:])}
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._write(411, b"")  # the clients measured send Content-Length; this server reads nothing else
                self.transport.close()
                return
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return  # the body is still coming
            body, self.buffer = self.buffer[end + 4 : end + 4 + length], self.buffer[end + 4 + length :]
            self._respond(head[0].split(" ", 1)[0], body)

    def _respond(self, method: str, body: bytes) -> None:
        if method == "GET":
            self._write(405, b"")
        elif method == "DELETE":
            self._write(200, b"")
        elif (reply := answer(body)) is None:
            self._write(202, b"")
        else:
            session = b"mcp-session-id: canned\r\n" if b'"initialize"' in body else b""
            self._write(200, reply, b"content-type: application/json\r\n" + session)

    def _write(self, status: int, body: bytes, headers: bytes = b"") -> None:
        head = f"HTTP/1.1 {status} {'OK' if status < 300 else 'No'}\r\ncontent-length: {len(body)}\r\n".encode()
        self.transport.write(head + headers + b"\r\n" + body)


async def serve_http(port: int) -> None:
    listener = socket.create_server(("127.0.0.1", port))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets on Linux
    server = await asyncio.get_running_loop().create_server(_Http, sock=listener)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        asyncio.run(serve_http(int(sys.argv[2])))
    else:
        asyncio.run(serve_stdio())
