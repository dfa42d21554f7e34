"""Which answers to 2026-07-28 questions were used already, so each counts once.

A sealed `requestState` can be sent again as often as a client likes until it expires; the seal
proves only that this gateway wrote it. Every question gets a random id, and the id of an answer
that was acted on is kept here until the state that asked it expires (after that the state itself
is refused). `MemoryLedger` is right for one process. Replicas that accept each other's states
(`AGENTIFY_STATE_KEYS`) share `RedisLedger`: one atomic `SET NX` with the state's expiry, so an
answer counts once across the cluster, whichever replica it reaches. When Redis cannot be reached
the answer is not used (`Denied`): accepting it could let a replayed round run twice.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Protocol

import anyio

from agentify.errors import Denied
from agentify.security.credentials import mask_url

REDIS_SECONDS = 2.0
"""The longest one check may wait for Redis; past it, Redis counts as down."""


class AnswerLedger(Protocol):
    async def use(self, question_id: str, until: float) -> bool:
        """True the first time `question_id` is used; False ever after, until `until` (epoch seconds)."""
        ...

    async def aclose(self) -> None: ...


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

    async def aclose(self) -> None:
        return None


class RedisLedger:
    """The used ids of every replica, as keys that expire with their states."""

    def __init__(self, url: str) -> None:
        # imported here: the redis package costs every gateway without Redis 0.3 s of CPU at start
        from redis.asyncio import Redis
        from redis.exceptions import RedisError

        self._where = mask_url(url)
        self._client = Redis.from_url(url, socket_connect_timeout=REDIS_SECONDS, socket_timeout=REDIS_SECONDS)
        self._unreachable = (RedisError, OSError, TimeoutError)

    async def use(self, question_id: str, until: float) -> bool:
        """Raises Denied when Redis cannot be reached."""
        expiry = max(math.ceil(until), math.ceil(time.time()) + 1)
        try:
            with anyio.fail_after(REDIS_SECONDS):
                first = await self._client.set(f"agentify:answer:{question_id}", b"1", nx=True, exat=expiry)
        except self._unreachable as exc:
            raise Denied(
                f"the record of used answers in {self._where} cannot be reached ({type(exc).__name__}), so this "
                "answer was not used and nothing was run. Call the tool again once Redis is back."
            ) from None
        return bool(first)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(REDIS_SECONDS):
            await self._client.aclose()
