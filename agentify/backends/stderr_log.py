"""A backend's stderr: the recent lines, and log records that a flood cannot multiply without bound."""

from __future__ import annotations

import re
import time
from collections import deque

from loguru import logger

TAIL_LINES = 200
LOG_RATE = 200  # lines a second logged per backend; the rest are counted, not logged
HINT_CHARS = 400
# The lines that say what went wrong, as Node, Python and most CLIs print them; a stack dump's last
# lines (`requireStack: []`, `}`, `Node.js v20`) do not.
_ERROR_LINE = re.compile(r"Error:|error:|Cannot find|ENOENT|not found|No such file")


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
        """For error messages: the last line that carries an error (`Error: Cannot find module ...`),
        else the last few distinct non-empty lines (a restarted backend repeats itself)."""
        lines = list(dict.fromkeys(line.strip() for line in self.tail if line.strip()))
        errors = [line for line in lines if _ERROR_LINE.search(line)]
        if errors:
            return "Its stderr says: " + errors[-1][:HINT_CHARS]
        if not lines:
            return "It printed nothing on stderr."
        return "Last stderr: " + " / ".join(line[:HINT_CHARS] for line in lines[-3:])
