"""Child processes, shared by the gateway's stdio transport and the arbigent runner.

Both start their children in a new session, so the child's pid is also its process group and
everything it spawns can be stopped together. Every wait here is bounded: the kernel gives no
event for "the whole group is gone", so it is polled.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import suppress

import anyio
import anyio.abc

POLL_SECONDS = 0.02
REAP_SECONDS = 5.0


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


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def wait_for_exit(process: anyio.abc.Process, seconds: float) -> int | None:
    """The exit code once the process has exited, or None if it still runs after `seconds`.

    Polls: `process.wait()` would also wait for pipe EOF, which a grandchild can hold open."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - there is no exit event to wait on
            await anyio.sleep(POLL_SECONDS)
    return process.returncode


async def _group_gone(process: anyio.abc.Process, unless: anyio.Event | None = None) -> None:
    # Reading returncode reaps the child, so its zombie does not keep the group "alive".
    def running() -> bool:
        return (process.returncode is None or group_alive(process.pid)) and not (unless and unless.is_set())

    while running():  # noqa: ASYNC110 - the kernel has no event for a process group's end
        await anyio.sleep(POLL_SECONDS)


async def stop_group(process: anyio.abc.Process, grace: float, kill_now: anyio.Event | None = None) -> bool:
    """SIGTERM to the child's whole process group, up to `grace` seconds, then SIGKILL; reaps the child.

    The group is signalled even when the child itself has already exited cleanly: its children may
    still run. `kill_now` cuts the grace period short. Returns False if something of the group
    survived SIGKILL (it cannot be waited for any longer).
    """
    pgid = process.pid
    _ = process.returncode  # reap an exited child first
    if group_alive(pgid):
        signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await _group_gone(process, unless=kill_now)
        if process.returncode is None or group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(REAP_SECONDS):
        await _group_gone(process)
    return process.returncode is not None and not group_alive(pgid)
