"""Answers what the SDK's stdio reader cannot parse, so a client never waits for a reply forever.

The SDK hands an unparseable line (malformed JSON, JSON nested too deep, a non-message) to the
session as an exception, which drops it silently. JSON-RPC says such input gets a parse error
with a null id; this sits between the reader and the server and sends it.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import mcp_types as types
from loguru import logger
from mcp.shared.message import SessionMessage
from pydantic import ValidationError


@asynccontextmanager
async def answering_parse_errors(read_stream: Any, write_stream: Any) -> AsyncIterator[AnsweringStream]:
    """Yields the read stream to serve from: every message of `read_stream` except the unreadable ones,
    which are answered with -32700 on `write_stream` and logged in one line."""
    async with AnsweringStream(read_stream, write_stream) as stream:
        yield stream


class Unreadable(ValueError):
    """A message that cannot be read, whose request id could still be found: its answer carries that id."""

    def __init__(self, reason: str, request_id: int | str | None) -> None:
        super().__init__(reason)
        self.request_id = request_id


class AnsweringStream:
    """A receive stream over `read_stream` that answers its unreadable items as it reads them.

    A wrapper rather than a task relaying into a second stream: every message would pay one more
    hand-over between tasks. Like the SDK's context streams it exposes the sender's `last_context`."""

    def __init__(self, read_stream: Any, write_stream: Any) -> None:
        self._read = read_stream
        self._write = write_stream
        self._first: SessionMessage | None = None

    async def wait_first(self) -> bool:
        """Waits for the client's first readable message (kept for `receive`); False when stdin ends first,
        so a gateway with nobody to serve starts no backend."""
        try:
            self._first = await self.receive()
        except anyio.EndOfStream:
            return False
        return True

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage:
        """The next readable message. Raises what the read stream raises (EndOfStream at its end)."""
        if self._first is not None:
            first, self._first = self._first, None
            return first
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return cast(SessionMessage, item)
            await self._answer(item)

    async def _answer(self, exc: Exception) -> None:
        reason = _reason(exc)
        logger.warning("unreadable message on stdin answered with a parse error: {}", reason)
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {reason}")
        request_id = exc.request_id if isinstance(exc, Unreadable) else None
        try:
            await self._write.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the server has stopped: nobody reads the answer

    def __aiter__(self) -> AnsweringStream:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._read.close()

    async def aclose(self) -> None:
        await self._read.aclose()

    async def __aenter__(self) -> AnsweringStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        return (f"{where}: " if where else "") + first["msg"][:200]
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
