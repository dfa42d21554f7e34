"""When a backend that ended badly may start again: an exponential backoff that starts over once a
session has stayed up long enough."""

from __future__ import annotations

import time
from dataclasses import dataclass

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds alive after which the backoff starts over


@dataclass
class Backoff:
    """When the next start may begin: doubling after each attempt that ended badly soon after it began."""

    delay: float = 0.0
    next_start_at: float = 0.0

    def after(self, ended_badly: bool, lasted: float) -> None:
        if ended_badly and lasted <= STABLE_AFTER:
            self.delay = min(BACKOFF_MAX, max(BACKOFF_FIRST, self.delay * 2))
        else:
            self.delay = 0.0
        self.next_start_at = time.monotonic() + self.delay

    def left(self) -> float:
        return max(0.0, self.next_start_at - time.monotonic())
