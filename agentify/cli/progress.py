"""What `agentify run` shows on stderr while the task runs: planning, the tool it calls, and the
backend's own progress messages.

On a terminal (`live`) it is one status line, rewritten in place with the seconds so far, so a long
call never leaves a blank screen, and cleared before the result (or a y/N question) is printed.
Piped, or with a log on the same stream, each report is a plain line of its own. The time spent
waiting for the user's answer is counted (`waited`), so the task's duration can leave it out.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import anyio

TICK_SECONDS = 1.0
_CLEAR = "\r\033[K"


class TaskProgress:
    def __init__(self, stream: TextIO, *, live: bool, prog: str = "agentify run") -> None:
        self._stream = stream
        self._live = live
        self._prog = prog
        self._status: str | None = None
        self._since = time.monotonic()
        self._paused_at: float | None = None
        self.waited = 0.0
        """Seconds spent in `paused` (at the y/N prompt)."""

    async def report(self, message: str) -> None:
        """A `Progress` of the task runner: one report (a step, or the backend's message)."""
        if self._live:
            self._status = message
            self._draw()
        else:
            self._write(f"{self._prog}: {message}\n")

    async def ticking(self) -> None:
        """On a terminal, redraws the status every second (the seconds go on); returns at once otherwise."""
        while self._live:
            await anyio.sleep(TICK_SECONDS)
            self._draw()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """While the user is asked something: no status line, and the time not counted as the task's."""
        self.clear()
        self._paused_at = time.monotonic()
        try:
            yield
        finally:
            self.waited += time.monotonic() - self._paused_at
            self._paused_at = None

    def clear(self) -> None:
        if self._live and self._status is not None:
            self._write(_CLEAR)

    def _draw(self) -> None:
        if self._status is None or self._paused_at is not None:
            return
        seconds = f" ({time.monotonic() - self._since - self.waited:.0f} s)"
        width = shutil.get_terminal_size().columns - 1  # one physical line, or \r cannot take it back
        line = f"{self._prog}: {self._status}"
        if len(line) + len(seconds) > width:
            line = line[: max(width - len(seconds) - 1, 0)] + "…"
        self._write(f"{_CLEAR}{line}{seconds}")

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            self._live = False  # stderr is gone: nobody to show it to
