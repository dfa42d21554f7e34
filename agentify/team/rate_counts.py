"""The moving-window counts of `server.limits` in Redis: one round trip a count, on one connection.

The count is the `limits` library's own: its Lua script, over its key (`agentify:` and `RateLimitItem.key_for`),
so that the library's `get_window_stats` (how long a refused caller waits) and every replica read one window.
Only the round trip is this module's. Through the library's storage a count cost about 500,000 instructions
(its client with a connection pool, retries and events; counted with callgrind), and a call makes two; through
a redis-py `Connection` still about 60 µs of CPU (its encoder, a stream reader and four turns of the event loop).
Here redis-py makes the connection (it knows the URL's forms, the password, TLS, unix sockets and the
handshake), then its transport is read by `_Replies`: a command is bytes written at once, its reply a future
that the bytes received resolve, about 15 µs. Replies come in the order of the commands, so counts may overlap
on the one connection, and a count given up mid-way (a deadline, a cancel) leaves its reply to be skipped.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import anyio

_MORE = object()
"""What `_Replies` reads when a reply has not fully arrived."""
MAX_UNANSWERED = 1000
"""Commands Redis may leave unanswered on one connection (counts given up included); past it the connection
ends and the next count makes a new one: a Redis that hangs costs no more memory than this."""


class RedisCounts:
    """The counts kept in the Redis of `url`. Its connection is made at the first count and again after one
    that ended (Redis went away, or answered what this module does not read)."""

    def __init__(self, url: str, seconds: float) -> None:
        from redis.asyncio import ConnectionPool

        self._pool: Any = ConnectionPool.from_url(url, socket_connect_timeout=seconds, socket_timeout=seconds)
        self._replies: _Replies | None = None
        self._connecting = anyio.Lock()
        self._sha: bytes | None = None

    async def acquire(self, key: str, limit: int, expiry: int) -> bool:
        """Counts one hit under `key` when fewer than `limit` were counted in the last `expiry` seconds.

        Raises:
            limits.errors.StorageError: Redis cannot be reached, or answered with an error."""
        from limits.errors import StorageError
        from redis.exceptions import RedisError

        try:
            replies = self._replies if self._replies is not None and self._replies.open else await self._connect()
            for _ in range(2):
                if self._sha is None:
                    loaded = await replies.ask(_command(b"SCRIPT", b"LOAD", _script()))
                    if isinstance(loaded, RedisError):
                        raise loaded
                    self._sha = loaded
                counted = await replies.ask(
                    _command(b"EVALSHA", self._sha, b"1", key, repr(time.time()), str(limit), str(expiry), b"1")
                )
                if not isinstance(counted, RedisError):
                    return bool(counted == 1)
                if not str(counted).startswith("NOSCRIPT"):
                    raise counted
                self._sha = None  # Redis restarted, or its scripts were flushed: loaded again
            raise RedisError("the rate-limit script could not be loaded")
        except (RedisError, OSError) as exc:
            raise StorageError(exc) from None

    async def aclose(self) -> None:
        if self._replies is not None:
            await self._replies.close()
            self._replies = None
        await self._pool.disconnect()

    async def _connect(self) -> _Replies:
        async with self._connecting:
            if self._replies is not None and self._replies.open:
                return self._replies  # another count made it meanwhile
            if self._replies is not None:
                await self._replies.close()
            connection = self._pool.make_connection()
            await connection.connect()
            self._replies = _Replies(connection)
            return self._replies


class _Replies(asyncio.Protocol):
    """The replies of one connection that redis-py made, read here. A reply is bytes (a bulk string), an int, True
    or False, None, or a `ResponseError`; what else Redis sends (an aggregate) ends the connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection  # closes the connection (and so the transport) in `close`
        self._transport: asyncio.Transport = connection._writer.transport  # redis-py's own stream
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._buffer = bytearray()
        self.open = True
        self._transport.set_protocol(self)

    async def ask(self, command: bytes) -> Any:
        if not self.open:
            raise ConnectionError("the connection to Redis closed")
        if len(self._waiting) >= MAX_UNANSWERED:
            self._end(ConnectionError(f"Redis left {MAX_UNANSWERED} commands unanswered"))
            raise ConnectionError(f"Redis left {MAX_UNANSWERED} commands unanswered: the connection is made again")
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        self._transport.write(command)
        return await answer

    async def close(self) -> None:
        self.open = False
        with anyio.CancelScope(shield=True):
            await self._connection.disconnect(nowait=True)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while self._buffer:
            try:
                reply = self._reply()
            except ValueError:
                self._end(ConnectionError("Redis answered what a rate-limit count cannot read"))
                return
            if reply is _MORE:
                return
            if not self._waiting:
                self._end(ConnectionError("Redis answered a command that was not sent"))
                return
            answer = self._waiting.popleft()
            if not answer.done():  # else its count was given up: the reply is skipped
                answer.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        while self._waiting:
            answer = self._waiting.popleft()
            if not answer.done():
                answer.set_exception(ConnectionError(f"the connection to Redis closed ({exc or 'by Redis'})"))

    def _end(self, error: Exception) -> None:
        self.open = False
        self._transport.close()
        self.connection_lost(error)

    def _reply(self) -> Any:
        """One reply taken from the buffer, or `_MORE`.

        Raises:
            ValueError: a reply of a kind a count never gets."""
        from redis.exceptions import ResponseError

        end = self._buffer.find(b"\r\n")
        if end < 0:
            return _MORE
        kind, line = bytes(self._buffer[:1]), bytes(self._buffer[1:end])
        if kind == b"$":
            size = int(line)
            if size < 0:
                del self._buffer[: end + 2]
                return None
            if len(self._buffer) < end + 2 + size + 2:
                return _MORE
            value = bytes(self._buffer[end + 2 : end + 2 + size])
            del self._buffer[: end + 2 + size + 2]
            return value
        del self._buffer[: end + 2]
        if kind == b":":
            return int(line)
        if kind == b"-":
            return ResponseError(line.decode(errors="replace"))
        if kind in (b"+", b"_", b"#"):  # a status; RESP3's null and boolean
            return line == b"t" if kind == b"#" else (None if kind == b"_" else line)
        raise ValueError(kind)


def _command(*parts: bytes | str) -> bytes:
    """A command as Redis reads it (RESP: an array of bulk strings)."""
    encoded = [part.encode() if isinstance(part, str) else part for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in encoded)


def _script() -> bytes:
    """The library's script that counts one hit in a moving window when the window has room (1), else nil."""
    from limits.aio.storage.redis.bridge import RedisBridge

    script: bytes = RedisBridge.SCRIPT_ACQUIRE_MOVING_WINDOW
    return script
