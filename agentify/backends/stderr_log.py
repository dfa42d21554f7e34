"""A backend's stderr: the recent lines, and log records that a flood cannot multiply without bound."""

from __future__ import annotations

import time
from collections import deque

from loguru import logger

TAIL_LINES = 200
LOG_RATE = 200  # lines a second logged per backend; the rest are counted, not logged


class StderrLog:
    """Fed one line at a time by the transport's reader; never blocks it."""

    def __init__(self, backend_id: str) -> None:
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._log = logger.bind(backend=backend_id)
        self._window = (0, 0, 0)  # (second, logged, suppressed)

    def line(self, text: str) -> None:
        self.tail.append(text)
        second = int(time.monotonic())
        window, logged, suppressed = self._window
        if second != window:
            if suppressed:
                self._log.warning("stderr: {} more lines were not logged (the console keeps the tail)", suppressed)
            window, logged, suppressed = second, 0, 0
        if logged < LOG_RATE:
            self._log.info("stderr: {}", text)
            logged += 1
        else:
            if suppressed == 0:
                self._log.warning("stderr: more than {} lines a second; counting instead of logging", LOG_RATE)
            suppressed += 1
        self._window = (window, logged, suppressed)

    def hint(self) -> str:
        """The last few distinct non-empty lines, for error messages (a restarted backend repeats itself)."""
        lines = list(dict.fromkeys(line for line in self.tail if line.strip()))[-3:]
        return ("Last stderr: " + " / ".join(lines)) if lines else "It printed nothing on stderr."
