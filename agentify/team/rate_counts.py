"""The moving-window counts of `server.limits` in Redis: one `EVALSHA` a count, on one redis-py connection.

The count is the `limits` library's own: its Lua script, over its key (`agentify:` and `RateLimitItem.key_for`),
so that the library's `get_window_stats` (how long a refused caller waits) and every replica read one window.
Only the round trip is this module's: through the library's storage a count cost about 500,000 instructions
(its redis-py client with a connection pool, retries and events; counted with callgrind), and a call makes two.
Here one redis-py `Connection` (made from the URL by redis-py, which knows its forms, the password, TLS and
unix sockets) sends the command and reads its reply, one count at a time. A count given up mid-way (a deadline,
a cancel) makes redis-py close the connection, so no reply is left to be read by the next count; the next
count connects again.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import anyio


class RedisCounts:
    """The counts kept in the Redis of `url`, given at most `seconds` to connect. How long a count waits for its
    answer is the caller's deadline (`Limiter` gives each `REDIS_SECONDS`): a count given up there closes the
    connection (redis-py does), and the counts waiting their turn behind it meet their own deadlines."""

    def __init__(self, url: str, seconds: float) -> None:
        from limits.aio.storage.redis.bridge import RedisBridge
        from redis.asyncio import ConnectionPool

        pool: Any = ConnectionPool.from_url(url, socket_connect_timeout=seconds)
        self._connection: Any = pool.make_connection()  # connects at its first command, again after it closed
        self._script: bytes = RedisBridge.SCRIPT_ACQUIRE_MOVING_WINDOW
        self._sha = hashlib.sha1(self._script).hexdigest()  # what Redis names a loaded script by
        self._turn = anyio.Lock(fast_acquire=True)  # no turn of the event loop when free

    async def acquire(self, key: str, limit: int, expiry: int) -> bool:
        """Counts one hit under `key` when fewer than `limit` were counted in the last `expiry` seconds.

        Raises:
            limits.errors.StorageError: Redis cannot be reached, or answered with an error."""
        from limits.errors import StorageError
        from redis.exceptions import NoScriptError, RedisError

        arguments = (key, time.time(), limit, expiry, 1)
        try:
            async with self._turn:
                try:
                    counted = await self._ask("EVALSHA", self._sha, 1, *arguments)
                except NoScriptError:  # Redis restarted, or its scripts were flushed: sent whole, and so loaded
                    counted = await self._ask("EVAL", self._script, 1, *arguments)
        except (RedisError, OSError) as exc:
            raise StorageError(exc) from None
        return bool(counted == 1)

    async def aclose(self) -> None:
        await self._connection.disconnect()

    async def _ask(self, *command: Any) -> Any:
        await self._connection.send_command(*command)
        return await self._connection.read_response()
