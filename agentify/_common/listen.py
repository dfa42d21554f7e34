"""The listening sockets of agentify's HTTP servers (MCP over HTTP, the debug console), and uvicorn
inside agentify's own event loop (`EmbeddedServer`).

Built from `getaddrinfo`'s family, type and protocol: with the protocol set to TCP, asyncio turns
Nagle's algorithm off (`TCP_NODELAY`) on every connection it accepts, so a small reply on a
kept-alive connection leaves at once instead of after the peer's delayed ACK (about 40 ms).
"""

from __future__ import annotations

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


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal capture: SIGINT and SIGTERM belong to agentify, which tells the server
    when to stop (`should_exit`)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
