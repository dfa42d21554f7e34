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
way out, blocking as they were. `pipe_stdio` yields None where this does not apply (Windows, a
terminal, a file, one socket for both): the SDK's transport serves then. Every send waits until its
message is written, as the SDK's flush does, so nothing sent is lost when the process ends.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from agentify.backends.stdio_framing import MESSAGE_LIMIT, Oversized, frames
from agentify.mcp_server.stdio_guard import Unreadable

READ_BYTES = 256 * 1024
CLOSE_SECONDS = 5.0


@asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[PipeReadStream, PipeWriteStream] | None]:
    """The read and write streams of the MCP session on stdin and stdout, or None where the SDK's transport
    serves: Windows, a terminal or a file, or one socket for both (socat, inetd), which asyncio's write
    pipe would take for closed as soon as the client writes to it."""
    wires = None if sys.platform == "win32" or not _separate_pipes() else _claim()
    if wires is None:
        yield None
        return
    try:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_BYTES, loop=loop)
        # The transports own (and close) descriptors of their own; `wires` restore fds 0 and 1.
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            open(os.dup(wires.stdin), "rb", buffering=0),  # noqa: ASYNC230 - a descriptor held, no I/O
        )
        try:
            write_transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin,
                open(os.dup(wires.stdout), "wb", buffering=0),  # noqa: ASYNC230 - a descriptor held, no I/O
            )
            write_transport.set_write_buffer_limits(high=0)  # each send waits until written, as the SDK flushes
            writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
            try:
                yield PipeReadStream(reader), PipeWriteStream(writer)
            finally:
                await _flushed(writer)
        finally:
            read_transport.close()
    finally:
        wires.release()


@dataclass(frozen=True)
class _Wires:
    """Private duplicates of the client's pipes, while fds 0 and 1 point at the null device and stderr."""

    stdin: int
    stdout: int
    blocking: tuple[bool, bool]

    def release(self) -> None:
        """Points fds 0 and 1 at the client's pipes again, blocking as they were."""
        for wire, fd, blocking in ((self.stdin, 0, self.blocking[0]), (self.stdout, 1, self.blocking[1])):
            with suppress(OSError):
                os.dup2(wire, fd)
                os.set_blocking(fd, blocking)  # the transports made the pipes' shared descriptions non-blocking
            with suppress(OSError):
                os.close(wire)


def _claim() -> _Wires | None:
    """The client's pipes, fds 0 and 1 diverted; None (nothing changed) when a descriptor cannot be made."""
    import fcntl

    wires: list[int] = []
    try:
        blocking = (os.get_blocking(0), os.get_blocking(1))
        wires.append(fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3))
        wires.append(fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3))
    except OSError:
        for wire in wires:
            os.close(wire)
        return None
    claimed = _Wires(wires[0], wires[1], blocking)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
    except OSError:
        claimed.release()
        return None
    return claimed


async def _flushed(writer: asyncio.StreamWriter) -> None:
    """Closes the client's stdout once what was sent is written (bounded: a client may stop reading).
    With no high-water mark, draining waits until the transport holds nothing."""
    with anyio.move_on_after(CLOSE_SECONDS, shield=True), suppress(OSError):
        await writer.drain()
    writer.close()


def _separate_pipes() -> bool:
    try:
        stdin, stdout = os.fstat(0), os.fstat(1)
    except OSError:
        return False
    pipes = all(stat.S_ISFIFO(s.st_mode) or stat.S_ISSOCK(s.st_mode) for s in (stdin, stdout))
    return pipes and (stdin.st_dev, stdin.st_ino) != (stdout.st_dev, stdout.st_ino)


class PipeReadStream:
    """The client's messages, each parsed when the server asks for the next; an unreadable one is handed
    over as its exception, as the SDK's read streams do."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._lines = frames(_chunks(reader), MESSAGE_LIMIT)

    async def receive(self) -> SessionMessage | Exception:
        """Raises anyio.EndOfStream when stdin ends. Cancelled, the stream ends with it (its line generator
        is finished): only the server's shutdown cancels a read."""
        try:
            line = await anext(self._lines)
        except StopAsyncIteration:
            raise anyio.EndOfStream from None
        if isinstance(line, Oversized):
            mib = line.size / (1024 * 1024)
            why = f"the message was {mib:.0f} MiB, over the {line.limit // (1024 * 1024)} MiB limit"
            return Unreadable(why, line.request_id())
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:  # pydantic's ValidationError is one
            if line.isascii():
                return exc
        try:  # read as the SDK's transport reads it: bytes that are not UTF-8 replaced
            text = line.decode("utf-8", "replace")
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except ValueError as exc:
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
