"""A stdio transport to one backend process, with what the SDK's `stdio_client` does not expose.

Why not `mcp.client.stdio.stdio_client` as it is: the gateway needs the child's pid and exit
status (for `list_backends`, the console and error messages), its stderr as a stream read in
the event loop (tagged log records that can never block the child), an end-of-stream signal
when the backend dies, and a process-group kill even after a clean exit (npx leaves
grandchildren behind). The JSON-RPC session on top is the SDK's own `ClientSession`.

Shutdown mirrors the SDK and the MCP spec: close stdin, wait, then SIGTERM and SIGKILL to
the process group; shielded, every wait bounded.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from agentify._common.background import background
from agentify._common.proc import iter_lines, open_group_process, stop_group, wait_for_exit
from agentify.backends.stdio_framing import Oversized, frames

EXIT_GRACE_SECONDS = 2.0
KILL_GRACE_SECONDS = 2.0
STDERR_LINE_LIMIT = 4096


@dataclass
class BackendProcess:
    """A running backend: the session's stream pair plus what the gateway shows about it."""

    pid: int
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    stdout_closed: anyio.Event
    _process: Process

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait_exit(self, seconds: float) -> int | None:
        """The exit code once the process has exited, or None if it is still running after `seconds`."""
        return await wait_for_exit(self._process, seconds)


@asynccontextmanager
async def spawn_backend(
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: str | None,
    on_stderr_line: Callable[[str], None],
) -> AsyncIterator[BackendProcess]:
    """Starts the backend in its own process group with the environment `env` (whole: see
    environment.py) and bridges its pipes.

    Raises:
        OSError: the command cannot be started (not found, not executable, bad cwd).
    """
    process = await open_group_process([command, *args], stdin=subprocess.PIPE, cwd=cwd, env=env)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)
    stdout_closed = anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        try:
            async with read_send:
                async for line in frames(process.stdout):
                    message: SessionMessage | Exception
                    if isinstance(line, Oversized):
                        message = line.as_message()
                    else:
                        try:
                            message = SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                        except ValueError as exc:
                            message = exc
                    await read_send.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            stdout_closed.set()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for line in iter_lines(process.stderr, limit=STDERR_LINE_LIMIT):
            on_stderr_line(line.decode("utf-8", errors="replace").rstrip("\r"))

    async with background() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(read_stderr)
        try:
            yield BackendProcess(process.pid, read_recv, write_send, stdout_closed, process)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)


async def _stop(process: Process) -> None:
    """Close stdin, wait for a clean exit, then clear the whole process group."""
    if process.stdin is not None:
        with anyio.move_on_after(0.5):
            await process.stdin.aclose()
    await wait_for_exit(process, EXIT_GRACE_SECONDS)
    # Always signal the group: a server that exited cleanly can leave children behind.
    await stop_group(process, KILL_GRACE_SECONDS)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with anyio.move_on_after(0.5):
                await stream.aclose()
