"""Rate limits (`server.limits`), counted with the `limits` library in a moving window.

Every `tools/call` of the gateway is charged once to the caller's principal (`charge_principal`), and
a call that reaches a backend once more to that backend (`charge_backend`). A call over a limit is
refused before it runs (`RateLimited`, with the seconds until one may pass).

The counts live in memory, or in Redis when `server.redis` (`AGENTIFY_REDIS_URL`) is set, where every
replica shares them (the library's Lua scripts make each hit atomic; in Redis a hit goes through
`rate_counts`, a lighter round trip than the library's client). The storage is the seam: any
`limits` async storage will do. When Redis cannot be reached, `whenRedisDown` decides: `allow` counts
nothing until it is back (the team keeps working; logged once per outage), `refuse` refuses every
limited call as `rate_limited` until it is back.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import anyio
from loguru import logger

from agentify.config.server import LimitsConfig
from agentify.errors import RateLimited
from agentify.security.credentials import mask_url
from agentify.team.rate_counts import RedisCounts

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.aio.storage import Storage

REDIS_SECONDS = 2.0
"""The longest one count may wait for Redis; past it, Redis counts as down."""
KEY_PREFIX = "agentify"
"""The prefix of every count's key in Redis."""
REFUSED_RETRY_SECONDS = 5.0
"""What a call refused because Redis is down is told to wait (`whenRedisDown: refuse`)."""


class Limiter:
    """Without limits configured it counts nothing, and the library is not even imported (start-up time)."""

    def __init__(self, config: LimitsConfig, redis_url: str | None = None) -> None:
        self._principal: list[RateLimitItem] = []
        self._backends: dict[str, list[RateLimitItem]] = {}
        self._refuse_when_down = False
        self._redis_url = redis_url
        self._where = mask_url(redis_url) if redis_url else "memory"
        self._storage: Storage | None = None
        self._strategy: Any = None
        self._counts: RedisCounts | None = None
        self._down = False
        self.configure(config)

    def configure(self, config: LimitsConfig) -> None:
        """Applies `config` from the next call on (the config file changed `server.limits`). A limit that
        changed counts afresh (the library keys its counts by the limit); one that did not keeps its counts."""
        self._refuse_when_down = config.when_redis_down == "refuse"
        if not config.any:
            self._principal, self._backends = [], {}
            return
        from limits import parse_many
        from limits.aio.strategies import MovingWindowRateLimiter

        self._principal = parse_many(config.per_principal) if config.per_principal else []
        self._backends = {backend: parse_many(limit) for backend, limit in config.per_backend.items()}
        if self._storage is None:
            self._storage = _storage(self._redis_url)
            self._strategy = MovingWindowRateLimiter(self._storage)
            self._counts = RedisCounts(self._redis_url, REDIS_SECONDS) if self._redis_url else None

    @property
    def where(self) -> str:
        """Where the counts are kept, for people: "memory", or the Redis URL without its password."""
        return self._where

    async def charge_principal(self, principal: str) -> None:
        """Raises RateLimited when `principal` is over `perPrincipal` (or Redis is down and that refuses)."""
        await self._charge(self._principal, "principal", principal, f"{principal!r} is over the limit of")

    async def charge_backend(self, backend: str) -> None:
        """Raises RateLimited when `backend` is over its `perBackend` limit."""
        await self._charge(
            self._backends.get(backend, []), "backend", backend, f"backend {backend!r} is over its limit of"
        )

    async def aclose(self) -> None:
        """Closes the Redis connections (shielded, bounded)."""
        client = getattr(getattr(self._storage, "bridge", None), "storage", None)  # the library's redis-py client
        with anyio.CancelScope(shield=True), anyio.move_on_after(REDIS_SECONDS):
            if client is not None:
                await client.aclose()
            if self._counts is not None:
                await self._counts.aclose()

    async def _charge(self, items: list[RateLimitItem], kind: str, name: str, over: str) -> None:
        if not items or self._strategy is None:
            return
        from limits.errors import StorageError

        try:
            with anyio.fail_after(REDIS_SECONDS):
                for item in items:
                    if not await self._hit(item, kind, name):
                        reset, _ = await self._strategy.get_window_stats(item, kind, name)
                        wait = max(1, math.ceil(reset - time.time()))
                        raise RateLimited(
                            f"{over} {_spoken(item)} (server.limits); nothing was run. Try again in {wait} s.",
                            retry_after_seconds=wait,
                        )
        except (StorageError, TimeoutError) as exc:
            self._storage_down(exc)
            if self._refuse_when_down:
                raise RateLimited(
                    f"the rate-limit counts in {self._where} cannot be reached, and server.limits.whenRedisDown is "
                    f"refuse: nothing was run. Try again in {REFUSED_RETRY_SECONDS:g} s; an operator must bring "
                    "Redis back.",
                    retry_after_seconds=REFUSED_RETRY_SECONDS,
                ) from None
            return
        if self._down:
            self._down = False
            logger.warning("the rate-limit counts in {} can be reached again: limits hold again", self._where)

    async def _hit(self, item: RateLimitItem, kind: str, name: str) -> bool:
        """Counts one hit when `item`'s window has room: in Redis, the library's count over the same key as its
        `MovingWindowRateLimiter.hit` (see `rate_counts`)."""
        if self._counts is not None:
            return await self._counts.acquire(
                f"{KEY_PREFIX}:{item.key_for(kind, name)}", item.amount, item.get_expiry()
            )
        hit: bool = await self._strategy.hit(item, kind, name)
        return hit

    def _storage_down(self, exc: BaseException) -> None:
        if self._down:
            return
        self._down = True
        cause = getattr(exc, "storage_error", exc)  # the library's StorageError wraps what Redis raised
        then = "every limited call is refused" if self._refuse_when_down else "calls run uncounted"
        logger.error(
            "the rate-limit counts in {} cannot be reached ({}): {} until it is back (server.limits.whenRedisDown)",
            self._where,
            type(cause).__name__,
            then,
        )


def _storage(redis_url: str | None) -> Storage:
    from limits.aio.storage import MemoryStorage, RedisStorage

    if redis_url is None:
        return MemoryStorage()
    options: dict[str, Any] = {"socket_connect_timeout": REDIS_SECONDS, "socket_timeout": REDIS_SECONDS}
    # The library's spelling of a socket path is async+redis+unix://
    uri = "async+redis+" + redis_url if redis_url.startswith("unix:") else "async+" + redis_url
    return RedisStorage(uri, wrap_exceptions=True, implementation="redispy", key_prefix=KEY_PREFIX, **options)


def _spoken(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    return f"{item.amount} per {unit}" if item.multiples == 1 else f"{item.amount} per {item.multiples} {unit}s"
