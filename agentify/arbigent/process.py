"""Running the CLI as a child process that can always be stopped, and one run per working directory.

The child gets stdin closed, its own session (so its process group holds everything it spawns) and
the working directory it is given. stdout and stderr are read concurrently into bounded captures
while the child runs, so it never blocks on a full pipe. A timeout or a cancellation sends SIGTERM
to the whole group, waits the grace period (Arbigent's shutdown hook writes result.yml then), and
sends SIGKILL to whatever is left. Every wait is bounded.
"""

from __future__ import annotations

import codecs
import fcntl
import hashlib
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
from loguru import logger

from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.results import OutputCapture
from agentify.proc import group_alive, stop_group

LineHandler = Callable[[str], None]

MAX_LINE = 8192
"""Longer lines are handed on in pieces so one endless line cannot grow a buffer without bound."""
_DRAIN_SECONDS = 5.0
"""After the child exited, how long its pipes may stay open (held by an escaped grandchild)."""
_KILL_REAP_SECONDS = 5.0
_LOCK_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class ProcessOutcome:
    exit_code: int | None
    """`None` when the child could not be seen to exit (it survived SIGKILL)."""
    timed_out: bool


async def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout: OutputCapture,
    stderr: OutputCapture,
    on_stdout_line: LineHandler,
    on_stderr_line: LineHandler,
    time_limit: float,
    grace: float,
    kill_now: anyio.Event,
) -> ProcessOutcome:
    """Runs `argv` to completion, the timeout, or cancellation, and leaves nothing of it running.

    `kill_now` cuts any grace period short (set when the runner itself is told to stop).

    Raises:
        OSError: the executable could not be started.
    """
    process = await anyio.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    log = logger.bind(pid=process.pid)
    log.debug("arbigent started as pid {}", process.pid)
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None and process.stderr is not None
            drained = (anyio.Event(), anyio.Event())
            tg.start_soon(_pump, process.stdout, stdout, on_stdout_line, drained[0])
            tg.start_soon(_pump, process.stderr, stderr, on_stderr_line, drained[1])
            with anyio.move_on_after(time_limit) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                log.warning("arbigent run exceeded the timeout of {} s; stopping it", time_limit)
                await stop_process_group(process, grace, kill_now)
            with anyio.move_on_after(_DRAIN_SECONDS):
                for event in drained:
                    await event.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop_process_group(process, grace, kill_now)
            with anyio.move_on_after(_KILL_REAP_SECONDS):
                await process.aclose()
    return ProcessOutcome(process.returncode, timed_out)


async def stop_process_group(process: anyio.abc.Process, grace: float, kill_now: anyio.Event) -> None:
    """SIGTERM to the child's process group, up to `grace` seconds to exit, then SIGKILL (`agentify.proc`)."""
    pgid = process.pid
    if not group_alive(pgid) and process.returncode is not None:
        return
    logger.bind(pid=pgid).info("stopping arbigent (process group {}): SIGTERM, {} s grace, then SIGKILL", pgid, grace)
    if not await stop_group(process, grace, kill_now):
        logger.bind(pid=pgid).error("process group {} is still alive after SIGKILL", pgid)


async def _pump(
    stream: anyio.abc.ByteReceiveStream, capture: OutputCapture, on_line: LineHandler, drained: anyio.Event
) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""

    def feed(text: str) -> None:
        nonlocal pending
        capture.write(text)
        pending += text
        *lines, pending = pending.split("\n")
        for line in lines:
            on_line(line.rstrip("\r"))
        while len(pending) > MAX_LINE:
            on_line(pending[:MAX_LINE])
            pending = pending[MAX_LINE:]

    try:
        async for chunk in stream:
            feed(decoder.decode(chunk))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        feed(decoder.decode(b"", final=True))
        if pending:
            on_line(pending)
        drained.set()


class WorkdirLocks:
    """One run at a time per working directory: within this process and across runner processes.

    Arbigent overwrites `arbigent-result/result.yml` on every run, so overlapping runs in one
    directory would report each other's results.
    """

    def __init__(self) -> None:
        self._locks: dict[Path, anyio.Lock] = {}

    @asynccontextmanager
    async def hold(
        self, directory: Path, on_queued: Callable[[], Awaitable[None]], *, time_limit: float
    ) -> AsyncIterator[None]:
        """Holds `directory` (an absolute, resolved path) for one run; awaits `on_queued` first if
        another run holds it.

        Raises:
            ToolCallError: the directory stayed busy for more than `time_limit` seconds.
        """
        lock = self._locks.setdefault(directory, anyio.Lock())
        async with AsyncExitStack() as held:
            try:
                with anyio.fail_after(time_limit):
                    if not _try_acquire(lock):
                        await on_queued()
                        on_queued = _nothing
                        await lock.acquire()
                    held.callback(lock.release)
                    fd = os.open(_lock_file(directory), os.O_RDWR | os.O_CREAT, 0o600)
                    held.callback(os.close, fd)
                    while not _try_flock(fd):
                        await on_queued()
                        on_queued = _nothing
                        await anyio.sleep(_LOCK_POLL_SECONDS)
            except TimeoutError:
                raise ToolCallError(
                    f"another arbigent run kept {directory} busy for more than {time_limit:g} s; try again later"
                ) from None
            yield


async def _nothing() -> None:
    pass


def _try_acquire(lock: anyio.Lock) -> bool:
    try:
        lock.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True


def _lock_file(directory: Path) -> Path:
    """A lock file per user and directory in the temp dir, never in the user's project."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"agentify-arbigent-{os.getuid()}-{digest}.lock"


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
