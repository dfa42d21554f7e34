"""Child processes, shared by the gateway's stdio transport and the arbigent runner.

Both start their children in a process group of their own (a new session on POSIX), so everything
a child spawns can be stopped together. This is the one module that signals process groups
(`killpg`); the tree kill itself is the MCP SDK's (`mcp.os`), on POSIX and on Windows.

Every wait here is bounded: the kernel gives no event for "the whole group is gone", so it is polled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.abc

POLL_SECONDS = 0.02
REAP_SECONDS = 5.0


async def open_group_process(
    argv: Sequence[str], *, stdin: int, cwd: str | Path | None, env: Mapping[str, str]
) -> anyio.abc.Process:
    """Starts `argv` with piped stdout and stderr, in a process group of its own.

    Raises:
        OSError: the executable cannot be started (not found, not executable, bad cwd).
    """
    return await anyio.open_process(
        list(argv),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=sys.platform != "win32",
        creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
    )


async def iter_lines(stream: anyio.abc.ByteReceiveStream, limit: int | None = None) -> AsyncIterator[bytes]:
    """Splits a byte stream into lines (without the newline) with no quadratic copying.

    A line longer than `limit` is cut to `limit` bytes (the rest of it is dropped), so one endless
    line cannot grow a buffer without bound. A broken or closed stream simply ends the iteration.
    """
    pending: list[bytes] = []
    size = 0
    try:
        async for chunk in stream:
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                pending.append(chunk[start:end])
                line = b"".join(pending)
                pending, size = [], 0
                yield line[:limit] if limit else line
                start = end + 1
            rest = chunk[start:]
            if rest and (limit is None or size < limit):
                pending.append(rest)
                size += len(rest)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    if pending:
        line = b"".join(pending)
        yield line[:limit] if limit else line


def running(process: anyio.abc.Process) -> bool:
    """Whether the child, or anything in its process group, still runs (reaps an exited child)."""
    exited = process.returncode is not None  # reading it reaps the child, so its zombie does not count
    if sys.platform == "win32":
        return not exited
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return not exited
    except PermissionError:
        pass  # a member we may not signal: still there
    return True


async def wait_for_exit(process: anyio.abc.Process, seconds: float) -> int | None:
    """The exit code once the process has exited, or None if it still runs after `seconds`.

    Polls: `process.wait()` would also wait for pipe EOF, which a grandchild can hold open."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - there is no exit event to wait on
            await anyio.sleep(POLL_SECONDS)
    return process.returncode


async def stop_group(process: anyio.abc.Process, grace: float, kill_now: anyio.Event | None = None) -> bool:
    """Stops the child's whole process group and reaps the child: the SDK's tree kill (POSIX: SIGTERM,
    up to `grace` seconds, then SIGKILL; Windows: the process and its job at once).

    The group is stopped even when the child itself has already exited cleanly: its children may
    still run. `kill_now` cuts the grace period short. Returns False if something of the group
    survived (it cannot be waited for any longer).
    """
    # Imported here: `import mcp` costs a second, which the runner's start-up checks must not pay.
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.os.win32.utilities import terminate_windows_process_tree

    if running(process):
        async with anyio.create_task_group() as tg:
            if kill_now is not None:
                tg.start_soon(_cancel_on, kill_now, tg.cancel_scope)
            if sys.platform == "win32":
                await terminate_windows_process_tree(process)
            else:
                await terminate_posix_process_tree(process, grace)
            tg.cancel_scope.cancel()
        if sys.platform != "win32" and running(process):  # kill_now cut the grace period short
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    with anyio.move_on_after(REAP_SECONDS):
        while running(process):  # noqa: ASYNC110 - the kernel has no event for a process group's end
            await anyio.sleep(POLL_SECONDS)
    return not running(process)


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
