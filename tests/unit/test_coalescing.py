"""The HTTP connections' transport: what uvicorn writes within one step of the event loop (a response's
head, then its body) leaves in one send, in order, and nothing written is lost when the connection closes."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from agentify.security.connections import _Coalescing

pytestmark = pytest.mark.anyio


class Recording:
    """A real socket transport, with the writes that reach it counted."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def connected() -> tuple[Recording, socket.socket]:
    ours, peer = socket.socketpair()
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
    peer.setblocking(False)
    return Recording(transport), peer


async def received(peer: socket.socket, size: int) -> bytes:
    data = b""
    async with asyncio.timeout(10):
        while len(data) < size:
            data += await asyncio.get_running_loop().sock_recv(peer, 65536)
    return data


async def test_writes_within_one_step_leave_as_one_send_in_order() -> None:
    recording, peer = await connected()
    coalescing = _Coalescing(recording, asyncio.get_running_loop())  # type: ignore[arg-type]
    coalescing.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    coalescing.write(b"{}")
    assert recording.writes == []  # not before the step ends
    await asyncio.sleep(0)
    assert recording.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    coalescing.write(b"next")
    await asyncio.sleep(0)
    assert recording.writes[1:] == [b"next"]
    assert await received(peer, 44) == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}next"
    coalescing.close()
    peer.close()


async def test_what_is_written_before_close_is_sent_before_the_connection_ends() -> None:
    recording, peer = await connected()
    coalescing = _Coalescing(recording, asyncio.get_running_loop())  # type: ignore[arg-type]
    coalescing.write(b"last words")
    coalescing.close()
    assert recording.writes == [b"last words"] and coalescing.is_closing()
    assert await received(peer, 10) == b"last words"
    await asyncio.sleep(0)  # the scheduled send finds nothing left, and writes nothing to a closed transport
    assert recording.writes == [b"last words"]
    peer.close()


async def test_writes_to_a_connection_already_closing_are_dropped_quietly() -> None:
    recording, peer = await connected()
    coalescing = _Coalescing(recording, asyncio.get_running_loop())  # type: ignore[arg-type]
    coalescing.write(b"too late")
    recording.transport.close()  # the peer went away meanwhile: uvicorn closed the real transport
    await asyncio.sleep(0)
    assert recording.writes == []
    assert coalescing.is_closing()  # the rest is the real transport's
    peer.close()


async def test_a_large_body_goes_out_as_it_comes_so_flow_control_sees_it() -> None:
    recording, peer = await connected()
    coalescing = _Coalescing(recording, asyncio.get_running_loop())  # type: ignore[arg-type]
    head, chunk = b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 40_000
    coalescing.write(head)
    coalescing.write(chunk)
    assert recording.writes == [] and coalescing.get_write_buffer_size() >= len(head) + len(chunk)
    coalescing.writelines([chunk])  # past FLUSH_BYTES: sent now, within the same step
    assert recording.writes == [head + chunk + chunk]
    await asyncio.sleep(0)
    assert len(recording.writes) == 1  # the scheduled send found nothing left
    assert await received(peer, len(head) + 2 * len(chunk)) == head + chunk + chunk
    coalescing.close()
    peer.close()
