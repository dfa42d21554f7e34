"""Messages from a stdio backend, one JSON text a line, each at most `MESSAGE_LIMIT` bytes.

A backend could write one endless line (a 200 MiB message once took the gateway to 1.08 GB and
left 489 MiB resident). A line past the limit is never kept: only its first and last bytes are,
to find which request it answers, and the request gets a JSON-RPC error in its place, so the
call fails at once with a `backend_error` that says why (and the backend keeps running). An
oversized message that answers no request of ours (a notification, a request to us) is dropped
and reported to the session as an unreadable message.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

MESSAGE_LIMIT = 32 * 1024 * 1024
_KEPT = 512  # bytes kept of each end of an oversized line: where a response's id is

_ID = r'(-?\d{1,18}|"[^"\\]{0,128}")'
_ID_FIRST = re.compile(r'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + r'\s*,\s*"(?:result|error)"')
"""{"jsonrpc": "2.0", "id": 7, "result": ...: Python servers write the id first."""
_ANSWER_FIRST = re.compile(r'\A\s*\{\s*"(?:result|error)"')
_REQUEST_ID_FIRST = re.compile(r'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + r'\s*,\s*"method"')
"""{"jsonrpc": "2.0", "id": 7, "method": ...: a request whose id comes first."""
_METHOD_FIRST = re.compile(r'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"method"')
"""{"method": ..., "params": ..., "jsonrpc": "2.0", "id": 7}: a request as TypeScript clients write it."""
_ID_LAST = re.compile(r'"id"\s*:\s*' + _ID + r'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
"""{"result": ..., "jsonrpc": "2.0", "id": 7}: TypeScript servers write it last."""


@dataclass
class Oversized:
    size: int
    limit: int
    head: bytes
    tail: bytes

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        self.tail = (self.tail + piece[-_KEPT:])[-_KEPT:]

    def request_id(self) -> int | str | None:
        """The id of the request this oversized message is, where it comes first or last; else None. Only a
        request's: an answer's id belongs to the other side's requests, where an error would be taken for
        the answer to one of its own."""
        head = self.head.decode("latin-1")
        found = _REQUEST_ID_FIRST.match(head) or (
            _METHOD_FIRST.match(head) and _ID_LAST.search(self.tail.decode("latin-1"))
        )
        return None if not found else _parsed_id(found.group(1))

    def as_message(self) -> SessionMessage | Exception:
        """The error answer that takes this message's place, or the exception reporting it when it answers nothing."""
        mib = self.size / (1024 * 1024)
        why = f"its message was {mib:.0f} MiB, over the {self.limit / (1024 * 1024):g} MiB limit; it was dropped"
        head, tail = self.head.decode("latin-1"), self.tail.decode("latin-1")
        found = _ID_FIRST.match(head) or (_ANSWER_FIRST.match(head) and _ID_LAST.search(tail))
        if not found:
            return ValueError(f"the backend wrote a message that answers no request: {why}")
        request_id = _parsed_id(found.group(1))
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=why)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _parsed_id(raw: str) -> int | str:
    return raw[1:-1] if raw.startswith('"') else int(raw)


async def frames(stream: AsyncIterable[bytes], limit: int = MESSAGE_LIMIT) -> AsyncGenerator[bytes | Oversized, None]:
    """The lines of `stream` (without the newline), or `Oversized` for a line longer than `limit`.

    Nothing more than `limit` bytes (plus one read) is held at a time, and no line is copied twice.
    A broken or closed stream ends the iteration.
    """
    pending: list[bytes] = []
    size = 0
    over: Oversized | None = None

    def take(piece: bytes) -> None:
        nonlocal pending, size, over
        if over is not None:
            over.add(piece)
        elif size + len(piece) > limit:
            pending.append(piece)
            joined = b"".join(pending)  # once per oversized line, of at most `limit` plus one read
            over = Oversized(len(joined), limit, joined[:_KEPT], joined[-_KEPT:])
            pending, size = [], 0
        else:
            pending.append(piece)
            size += len(piece)

    def line() -> bytes | Oversized:
        nonlocal pending, size, over
        done: bytes | Oversized = over if over is not None else b"".join(pending)
        pending, size, over = [], 0, None
        return done

    try:
        async for chunk in stream:
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                take(chunk[start:end])
                yield line()
                start = end + 1
            if start < len(chunk):
                take(chunk[start:])
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    if pending or over is not None:
        yield line()
