"""Answers what the SDK's stdio reader cannot parse, so a client never waits for a reply forever.

The SDK hands an unparseable line (malformed JSON, JSON nested too deep, a non-message) to the
session as an exception, which drops it silently. JSON-RPC says such input gets a parse error
with a null id; this sits between the reader and the server and sends it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError


@asynccontextmanager
async def answering_parse_errors(read_stream: Any, write_stream: Any) -> AsyncIterator[Any]:
    """Yields the read stream to serve from: every message of `read_stream` except the unreadable ones,
    which are answered with -32700 on `write_stream` and logged in one line."""
    send, receive = create_context_streams[SessionMessage | Exception](0)

    async def pump() -> None:
        try:
            async with send:
                async for item in read_stream:
                    if not isinstance(item, Exception):
                        await send.send(item)
                        continue
                    reason = _reason(item)
                    logger.warning("unreadable message on stdin answered with a parse error: {}", reason)
                    error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {reason}")
                    await write_stream.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the server has stopped: nothing is read any more

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield receive
        finally:
            tg.cancel_scope.cancel()


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        return (f"{where}: " if where else "") + first["msg"][:200]
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
