"""Connections to the console: idle and slow ones time out, and cannot crowd out real requests.

uvicorn alone gives a connection that never sends a request unlimited time, and its
`limit_concurrency` counts such connections: 64 idle sockets made every request a 503. Here
each HTTP connection is either *waiting* (connected, or done with its last response, and not
yet holding a complete request head) or *busy* (a request is being served, or it became a
WebSocket). A waiting connection is closed `HEAD_SECONDS` after it started waiting, however
slowly it trickles bytes in. When a new connection would go over `MAX_CONNECTIONS`, the
connection that has been waiting longest is closed to make room, so idle sockets only ever
crowd out each other; only when every connection is busy is the new one turned away.

A busy connection passed the Host, Origin and token checks within moments (a request without
the token is answered at once, unread; the public pages take no body), so only a token holder can
keep one busy. `serve --transport http` uses the same gate in front of its bearer check.

What a connection writes within one step of the event loop leaves in one send (`_Coalescing`): uvicorn
writes a response's head and body separately, two segments and two wake-ups for the client on a
TCP_NODELAY socket.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 5.0
MAX_CONNECTIONS = 64


class ConnectionGate:
    """The waiting connections of one console, oldest first, and the limit on all of them."""

    def __init__(self, limit: int = MAX_CONNECTIONS, head_seconds: float = HEAD_SECONDS) -> None:
        self.limit = limit
        self.head_seconds = head_seconds
        self.waiting: dict[GuardedHttp, None] = {}  # insertion order is waiting order

    def protocol(self) -> type[GuardedHttp]:
        """The uvicorn `http` protocol class bound to this gate."""
        return type("ConsoleHttp", (GuardedHttp,), {"gate": self})


class GuardedHttp(H11Protocol):
    gate: ConnectionGate
    _deadline: asyncio.TimerHandle | None = None
    _seen_cycle: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Coalescing(transport, self.loop))  # type: ignore[arg-type]
        self._wait_for_head()
        if len(self.connections) > self.gate.limit:
            oldest = next((other for other in self.gate.waiting if other is not self), None)
            (oldest or self)._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and self.cycle is not self._seen_cycle:  # a complete request head arrived
            self._seen_cycle = self.cycle
            if not self.cycle.response_complete:
                self._stop_waiting()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._stop_waiting()  # from here on the WebSocket protocol owns the connection
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._wait_for_head()  # before super(): it may go on with a pipelined request at once
        super().on_response_complete()

    def _wait_for_head(self) -> None:
        self._stop_waiting()
        self.gate.waiting[self] = None
        self._deadline = self.loop.call_later(self.gate.head_seconds, self._close)

    def _stop_waiting(self) -> None:
        self.gate.waiting.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self) -> None:
        self._stop_waiting()
        if not self.transport.is_closing():
            self.transport.close()


class _Coalescing:
    """A transport whose writes within one step of the event loop leave as one send: uvicorn writes a
    response's head and its body separately, which would be two segments on a TCP_NODELAY socket. Past
    `FLUSH_BYTES` what is held goes out at once, so flow control (`pause_writing`) sees a large body as
    it comes; the buffer size uvicorn reads counts what is held too."""

    FLUSH_BYTES = 64 * 1024

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)
        self._size += len(data)
        if self._size >= self.FLUSH_BYTES:
            self._flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._size + self._transport.get_write_buffer_size()

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self._transport.close()

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            if not self._transport.is_closing():
                self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)  # everything else is the real transport's
