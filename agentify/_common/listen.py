"""The listening sockets of agentify's HTTP servers (MCP over HTTP, the debug console), and uvicorn
inside agentify's own event loop (`EmbeddedServer`).

Built from `getaddrinfo`'s family, type and protocol: with the protocol set to TCP, asyncio turns
Nagle's algorithm off (`TCP_NODELAY`) on every connection it accepts, so a small reply on a
kept-alive connection leaves at once instead of after the peer's delayed ACK (about 40 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """Bound, listening and non-blocking (connections queue from here on, before a server accepts them).

    Raises:
        OSError: the host is unknown (`socket.gaierror`), or the address cannot be bound (in use, not an
            address of this machine).
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not SO_REUSEPORT: a live listener must win
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


TICK_SECONDS = 1.0
"""How often the server refreshes its `Date` header (to the second, as HTTP writes it). uvicorn's own loop
wakes every 0.1 s to look at `should_exit` as well: here setting it wakes the loop."""


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal capture: SIGINT and SIGTERM belong to agentify, which tells the server
    when to stop (`should_exit`), and without its tenfold tick: the main loop wakes once a second, or at
    once when `should_exit` is set (from any thread)."""

    _exiting = False
    _stop: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    @property  # type: ignore[override]  # uvicorn's plain attribute, which also wakes the main loop here
    def should_exit(self) -> bool:
        return self._exiting

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._exiting = value
        if value and self._stop is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter += 10  # uvicorn's on_tick refreshes the Date header when counter % 10 == 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), TICK_SECONDS)
