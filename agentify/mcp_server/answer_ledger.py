"""Which answers to 2026-07-28 questions were used already, so each counts once.

A sealed `requestState` can be sent again as often as a client likes until it expires; the seal
proves only that this gateway wrote it. Every question gets a random id, and the id of an answer
that was acted on is kept here until the state that asked it expires (after that the state itself
is refused). `MemoryLedger` is right for one process; replicas that accept each other's states
need one shared ledger behind the same protocol (an atomic set-if-absent with an expiry).
"""

from __future__ import annotations

import heapq
import time
from typing import Protocol


class AnswerLedger(Protocol):
    async def use(self, question_id: str, until: float) -> bool:
        """True the first time `question_id` is used; False ever after, until `until` (epoch seconds)."""
        ...


class MemoryLedger:
    """One process's used ids; expired ones are dropped as new ones come, so memory follows the live states."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._expiries: list[tuple[float, str]] = []

    async def use(self, question_id: str, until: float) -> bool:
        now = time.time()
        while self._expiries and self._expiries[0][0] <= now:
            self._used.discard(heapq.heappop(self._expiries)[1])
        if question_id in self._used:
            return False
        self._used.add(question_id)
        heapq.heappush(self._expiries, (max(until, now), question_id))
        return True

    def __len__(self) -> int:
        return len(self._used)
