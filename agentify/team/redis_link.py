"""One connection to the Redis replicas share (`server.redis`), made the same way for everything kept there:
bounded waits, the errors that mean "unreachable", and the URL as it may be shown (masked)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from agentify.security.credentials import mask_url

REDIS_SECONDS = 2.0
"""The longest one Redis command may wait; past it, Redis counts as down."""


@dataclass(frozen=True)
class RedisLink:
    client: Any
    where: str
    """The URL, masked."""
    unreachable: tuple[type[BaseException], ...]
    """What a command raises when Redis cannot be reached."""

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(REDIS_SECONDS):
            await self.client.aclose()


def redis_link(url: str) -> RedisLink:
    from redis.asyncio import Redis  # imported here: the package costs a gateway without Redis 0.3 s at start
    from redis.exceptions import RedisError

    client = Redis.from_url(url, socket_connect_timeout=REDIS_SECONDS, socket_timeout=REDIS_SECONDS)
    return RedisLink(client, mask_url(url), (RedisError, OSError, TimeoutError))
