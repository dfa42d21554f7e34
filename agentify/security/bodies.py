"""A cap and a deadline on request bodies, for the console and for MCP over HTTP.

It sits behind the token check (`ConsoleGuard`, `BearerAuth`), so only a request with the token is
read at all. A body that declares a larger `Content-Length` than the cap is refused before a byte
of it is read; one sent in chunks is refused as soon as it goes past the cap (413). A body that has
not arrived whole within `seconds` is refused too (408), so a token holder trickling bytes cannot
keep a connection, and with enough of them every connection, busy. Either way the connection
closes, so the rest is never read. A body within the cap is read here and handed to the app whole,
exactly as it came.
"""

from __future__ import annotations

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024  # a task is a query and a little context; the page sends a few hundred bytes
BODY_SECONDS = 10.0  # a body that has not arrived whole by then is refused: a stalled sender holds nothing


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES, seconds: float = BODY_SECONDS) -> None:
        self.app = app
        self.limit = limit
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send, f"declares {declared} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        deadline = anyio.current_time() + self.seconds  # for the whole body, however it is trickled in
        while True:
            message = None
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
            if message is None:
                response = JSONResponse(
                    {"detail": f"the request body did not arrive within {self.seconds:g} s"},
                    status_code=408,
                    headers={"connection": "close"},
                )
                await response(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away: let the app see that
                await self.app(scope, replayed([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send, "goes on past the cap")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, replayed([whole], receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str) -> None:
        detail = f"the request body {what}; at most {self.limit} bytes are accepted"
        response = JSONResponse({"detail": detail}, status_code=413, headers={"connection": "close"})
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed Content-Length before the app is called
    return None


def replayed(messages: list[Message], receive: Receive) -> Receive:
    """`receive`, giving `messages` back first (what a middleware read before handing the request on)."""
    pending = list(messages)

    async def replaying() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replaying
