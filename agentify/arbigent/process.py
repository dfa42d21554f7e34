"""Running the CLI as a child process that can always be stopped.

The child gets stdin closed, its own session (so its process group holds everything it spawns) and
the working directory it is given. stdout and stderr are split into lines (`agentify._common.proc`) and
decoded into bounded captures while the child runs, so it never blocks on a full pipe. A timeout or
a cancellation stops the whole group (`agentify._common.proc.stop_group`): SIGTERM, the grace period
(Arbigent's shutdown hook writes result.yml then), SIGKILL. Every wait is bounded.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
from loguru import logger

from agentify._common.proc import iter_lines, open_group_process, running, stop_group, wait_for_exit
from agentify.arbigent.results import OutputCapture

LineHandler = Callable[[str], None]

MAX_LINE = 65536
"""Bytes kept of one output line; the rest of a longer line is dropped and the cut is marked."""
_DRAIN_SECONDS = 5.0
"""After the child exited, how long its pipes may stay open (held by an escaped grandchild)."""
_CLOSE_SECONDS = 5.0


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
    process = await open_group_process(argv, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    log = logger.bind(pid=process.pid)
    log.debug("arbigent started as pid {}", process.pid)
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None and process.stderr is not None
            drained = (anyio.Event(), anyio.Event())
            tg.start_soon(_pump, process.stdout, stdout, on_stdout_line, drained[0])
            tg.start_soon(_pump, process.stderr, stderr, on_stderr_line, drained[1])
            if await wait_for_exit(process, time_limit) is None:
                timed_out = True
                log.warning("arbigent run exceeded the timeout of {} s; stopping it", time_limit)
                await _stop(process, grace, kill_now)
            with anyio.move_on_after(_DRAIN_SECONDS):
                for event in drained:
                    await event.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, grace, kill_now)
            with anyio.move_on_after(_CLOSE_SECONDS):
                await process.aclose()
    return ProcessOutcome(process.returncode, timed_out)


async def _stop(process: anyio.abc.Process, grace: float, kill_now: anyio.Event) -> None:
    log = logger.bind(pid=process.pid)
    if running(process):
        log.info("stopping arbigent (process group {}): SIGTERM, {} s grace, then SIGKILL", process.pid, grace)
    if not await stop_group(process, grace, kill_now):
        log.error("process group {} is still alive after SIGKILL", process.pid)


async def _pump(
    stream: anyio.abc.ByteReceiveStream, capture: OutputCapture, on_line: LineHandler, drained: anyio.Event
) -> None:
    """Decodes each line (a line never splits a UTF-8 character, so no incremental decoder is needed)."""
    try:
        async for raw in iter_lines(stream, MAX_LINE):
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if len(raw) == MAX_LINE:
                line += f" [... line cut at {MAX_LINE} bytes]"
            capture.write(line + "\n")
            on_line(line)
    finally:
        drained.set()
