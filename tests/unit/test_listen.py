"""The listening socket of MCP over HTTP and of the console: every accepted connection has Nagle's
algorithm off, so a small reply on a kept-alive connection is not held back for the peer's delayed ACK."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agentify._common.listen import listening_socket

pytestmark = pytest.mark.anyio


async def test_accepted_connections_have_tcp_nodelay() -> None:
    listener = listening_socket("127.0.0.1", 0, 8)
    accepted: asyncio.Queue[int] = asyncio.Queue()

    def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.put_nowait(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)  # as uvicorn serves a given socket
    async with server:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        nodelay = await asyncio.wait_for(accepted.get(), 10)
        writer.close()
    assert nodelay != 0


def test_a_busy_port_is_an_os_error() -> None:
    first = listening_socket("127.0.0.1", 0, 8)
    with first, pytest.raises(OSError):
        listening_socket("127.0.0.1", first.getsockname()[1], 8)
