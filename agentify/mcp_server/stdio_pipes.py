"""stdio on the event loop, for `agentify serve` where stdin and stdout are pipes (what every IDE gives).

The SDK's stdio transport reads stdin and writes stdout from worker threads, which suits a terminal
or a file and every platform, but makes each message cross threads on its way in and out, through
memory streams and their tasks. On POSIX pipes and sockets the messages are read and written here by
asyncio's pipe transports instead: the read stream parses the next line when the server asks for it
and the write stream writes when the server sends, with no thread and no task in between. Lines are
framed as the backends' are (`backends/stdio_framing`): one over `MESSAGE_LIMIT` is never held whole,
and is answered as unreadable like malformed JSON (`stdio_guard`).

As the SDK's transport does, while serving fd 0 reads the null device and fd 1 writes to stderr, so a
library or a child process that writes to stdout cannot corrupt the protocol; both are restored on the
way out. `pipe_stdio` yields None where this does not apply (Windows, a terminal, a file): the SDK's
transport serves then.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from agentify.backends.stdio_framing import MESSAGE_LIMIT, Oversized, frames

READ_BYTES = 256 * 1024


@asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[PipeReadStream, PipeWriteStream] | None]:
    """The read and write streams of the MCP session on stdin and stdout, or None when they are not pipes."""
    if sys.platform == "win32" or not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    import fcntl

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_BYTES, loop=loop)
    # The transports own (and close, when the server is done) descriptors of their own; `wire_*` restore fds 0 and 1.
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
        open(os.dup(wire_in), "rb", buffering=0),  # noqa: ASYNC230 - a descriptor held, no I/O
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin,
        open(os.dup(wire_out), "wb", buffering=0),  # noqa: ASYNC230 - a descriptor held, no I/O
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    try:
        yield PipeReadStream(reader), PipeWriteStream(writer)
    finally:
        read_transport.close()
        write_transport.close()
        for wire, fd in ((wire_in, 0), (wire_out, 1)):
            os.dup2(wire, fd)
            os.close(wire)


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeReadStream:
    """The client's messages, each parsed when the server asks for the next; an unreadable one is handed
    over as its exception, as the SDK's read streams do."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._lines = frames(_chunks(reader), MESSAGE_LIMIT)

    async def receive(self) -> SessionMessage | Exception:
        """Raises anyio.EndOfStream when stdin ends."""
        try:
            line = await anext(self._lines)
        except StopAsyncIteration:
            raise anyio.EndOfStream from None
        if isinstance(line, Oversized):
            mib = line.size / (1024 * 1024)
            return ValueError(f"the message was {mib:.0f} MiB, over the {line.limit // (1024 * 1024)} MiB limit")
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:  # pydantic's ValidationError is one
            return exc

    async def aclose(self) -> None:
        await self._lines.aclose()

    def __aiter__(self) -> PipeReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> PipeReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class PipeWriteStream:
    """The gateway's messages to the client, one JSON text a line, written as they are sent."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, message: SessionMessage) -> None:
        """Raises anyio.BrokenResourceError once the client no longer reads (the pipe closed)."""
        if self._writer.is_closing():
            raise anyio.BrokenResourceError
        line = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        try:
            self._writer.write(line)  # whole: messages sent from different tasks never interleave
            await self._writer.drain()
        except OSError as exc:  # BrokenPipeError, ConnectionResetError
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def __aenter__(self) -> PipeWriteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await reader.read(READ_BYTES):
        yield chunk
