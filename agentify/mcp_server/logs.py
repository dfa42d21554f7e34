"""The backends' log messages as the IDE gets them, and the level each client asked for.

A client says which levels it wants, and gets no backend logs until it does:
- a 2025-11-25 client with `logging/setLevel`, kept per MCP session (its connection; over stdio, the one
  client), never shared with another client of the gateway;
- a 2026-07-28 client in each request's `_meta` (`io.modelcontextprotocol/logLevel`, the per-request opt-in
  of that revision, as the SDK's `allowed_log_levels` reads it). It has no session and its server may not
  write logs on any stream but a request's, so it gets them only during the calls that carry a level.

During a call, the backend's messages go on that call's stream (`CallLogs`). A message the gateway cannot tie
to exactly one call (outside calls; each call has a session of its own, `backends/pool.py`) is
nobody's: over HTTP, where the gateway serves several people, it goes to the gateway's own log and to no
client's session; over stdio, whose one client is the user who started agentify, it goes to that client when
its level lets it through (`LogRelay`). Each message is redacted as progress is (the backends' known secrets),
bounded (`MAX_DATA_CHARS`) and names its backend: logger `<backend>` or `<backend>.<logger>`.

A flooding backend costs bounded memory: a call keeps at most `CALL_PENDING` messages waiting for its client
and the relay `RELAY_PENDING`; later ones are dropped and counted (the call's client is told how many). Over
HTTP it costs bounded CPU and disk too: at most `UNOWNED_PER_SECOND` messages a second of each backend that no
call owns are redacted and written to the gateway's log; the rest are counted, and the count is logged when the
backend's next second begins (and when the server stops).

Backends on a 2025-11-25 session have one level for all the calls of their session. Over stdio they are
asked (`logging/setLevel`) for the level the one client set. Over HTTP a client's level never reaches them:
they log at the gateway's own level (`logLevel`), whatever any client asks, and each client's level only
filters what it gets of its own calls (so one person's `debug` makes no backend chattier for everyone; a
client that wants more than the gateway's level gets no more). A 2026-07-28 backend gets each call's level
with the call.
"""

from __future__ import annotations

import json
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentify._common.background import background
from agentify.backends.logs import LEVELS, severity
from agentify.security.redact import Redactor

MAX_DATA_CHARS = 8000
"""A message's data beyond this (as JSON) is sent as its redacted text, cut, with a note of its length."""
MAX_LOGGER_CHARS = 200
CALL_PENDING = 200
RELAY_PENDING = 500
UNOWNED_PER_SECOND = 20
"""Over HTTP: the messages of one backend that no call owns written to the gateway's log in one second."""
SETTLE_SECONDS = 2.0
"""How long a call's result waits for the log messages that came before it to be written."""

Params = types.LoggingMessageNotificationParams
Send = Callable[[Params], Awaitable[None]]


def relayed(redactor: Redactor, backend: str, params: Params) -> Params:
    """The message as the IDE gets it: redacted, bounded, named for its backend."""
    text = json.dumps(params.data, default=str)
    data = redactor.bounded(text, MAX_DATA_CHARS) if len(text) > MAX_DATA_CHARS else redactor.data(params.data)
    name = backend + (f".{redactor.bounded(params.logger, MAX_LOGGER_CHARS)}" if params.logger else "")
    return Params(level=params.level, logger=name, data=data)


class CallLogs:
    """One call's `LogSink`: its messages reach its client one at a time, in the order they came."""

    def __init__(self, level: types.LoggingLevel, send: Send, redactor: Redactor) -> None:
        self.level = level
        self._send = send
        self._redactor = redactor
        self._pending: deque[tuple[str, Params]] = deque()
        self._dropped = 0
        self._waiting = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()

    def heard(self, backend: str, params: Params) -> None:
        if severity(params.level) < severity(self.level):
            return
        if len(self._pending) >= CALL_PENDING:
            self._dropped += 1
            return
        self._pending.append((backend, params))
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._waiting.set()

    async def deliver(self) -> None:
        """Writes the messages as they come; runs for the call."""
        try:
            while True:
                await self._waiting.wait()
                self._waiting = anyio.Event()
                while self._pending:
                    backend, params = self._pending.popleft()
                    await self._write(relayed(self._redactor, backend, params))
                if self._dropped:
                    dropped, self._dropped = self._dropped, 0
                    note = f"{dropped} log messages of the backend were dropped: it logged faster than they were sent"
                    await self._write(Params(level="warning", logger="agentify", data=note))
                self._idle.set()
        finally:
            self._idle.set()  # a cancelled delivery has nothing more to wait for

    async def settled(self) -> None:
        await self._idle.wait()

    async def _write(self, params: Params) -> None:
        try:
            await self._send(params)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError) as exc:
            logger.debug("a log message did not reach the client: {}", exc)


LOGURU_LEVELS: dict[str, str] = {"debug": "DEBUG", "info": "INFO", "notice": "INFO", "warning": "WARNING"}
"""A protocol level as the gateway's log names it; the others (error and above) are ERROR or CRITICAL."""


def protocol_level(loguru_level: str) -> types.LoggingLevel:
    """The gateway's own log level (`logLevel`: TRACE, DEBUG, INFO, SUCCESS, WARNING, ERROR, CRITICAL) as a
    protocol level."""
    named: dict[str, types.LoggingLevel] = {"TRACE": "debug", "DEBUG": "debug", "WARNING": "warning"}
    named |= {"ERROR": "error", "CRITICAL": "critical"}
    return named.get(loguru_level.upper(), "info")


def _loguru_level(level: str) -> str:
    if level in LOGURU_LEVELS:
        return LOGURU_LEVELS[level]
    return "ERROR" if level == "error" else "CRITICAL"


class LogRelay:
    """The level of each 2025-11-25 connection, and the messages no call owns: relayed to the one client over
    stdio, written to the gateway's log over HTTP (`own_level` given: the level backends are held at)."""

    def __init__(
        self,
        redactor: Redactor,
        tell_backends: Callable[[types.LoggingLevel], None],
        own_level: types.LoggingLevel | None = None,
    ) -> None:
        self._redactor = redactor
        self._tell_backends = tell_backends
        self._own_level = own_level
        if own_level is not None:
            tell_backends(own_level)
        self._levels: dict[Connection, types.LoggingLevel] = {}
        self._asked: types.LoggingLevel | None = None
        self._dropped = 0
        self._unowned = _PerSecond(UNOWNED_PER_SECOND)
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str, Params]](RELAY_PENDING)

    def set_level(self, ctx: ServerRequestContext[Any, Any], level: types.LoggingLevel) -> None:
        """`logging/setLevel` of the connection `ctx` came on."""
        connection: Connection = ctx.session._connection  # the SDK gives no public handle on it
        if connection not in self._levels:
            connection.exit_stack.callback(self._forget, connection)
        self._levels[connection] = level
        self._ask_backends()

    def level_of(self, ctx: ServerRequestContext[Any, Any]) -> types.LoggingLevel | None:
        """The level the client of this request asked for: its session's, or (2026-07-28) the request's own."""
        if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            level = (ctx.meta or {}).get(types.LOG_LEVEL_META_KEY)
            return level if level in LEVELS else None
        return self._levels.get(ctx.session._connection)

    @asynccontextmanager
    async def for_call(self, ctx: ServerRequestContext[Any, Any]) -> AsyncIterator[CallLogs | None]:
        """The call's log sink, for as long as it runs (None when its client asked for no logs). Leaving waits
        (bounded) until what the backend logged before its result has been written, so it comes first."""
        level = self.level_of(ctx)
        if level is None:
            yield None
            return

        async def send(params: Params) -> None:
            with warnings.catch_warnings():  # deprecated in 2026-07-28, where it is still the per-request log
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(
                    params.level, params.data, params.logger, related_request_id=ctx.request_id
                )

        logs = CallLogs(level, send, self._redactor)
        async with background() as tg:  # the call's errors and round-trip signals leave unwrapped
            tg.start_soon(logs.deliver)
            try:
                yield logs
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE_SECONDS):
                    await logs.settled()

    def heard(self, backend: str, params: Params) -> None:
        """A message no call owns (a `LogListener`): over HTTP, the gateway's log; over stdio, queued for the
        client when it wants it, or dropped."""
        if self._own_level is not None:
            if not self._unowned.admits(backend):  # before the redaction, which is what a flood would cost
                return
            message = relayed(self._redactor, backend, params)
            level = _loguru_level(params.level)
            logger.log(level, "{} logged (no single call owns it): {}", message.logger, message.data)
            return
        if not any(severity(params.level) >= severity(level) for level in self._levels.values()):
            return
        try:
            self._send.send_nowait((backend, params))
        except anyio.WouldBlock:
            self._dropped += 1

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with self._receive:
            async for backend, params in self._receive:
                message = relayed(self._redactor, backend, params)
                data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
                for connection, level in list(self._levels.items()):
                    if severity(params.level) >= severity(level):
                        await connection.notify("notifications/message", data)  # never raises: drops when closed
                if self._dropped:
                    logger.warning("dropped {} backend log messages: the clients read slower", self._dropped)
                    self._dropped = 0

    def close(self) -> None:
        self._send.close()
        self._unowned.flush()

    def _forget(self, connection: Connection) -> None:
        self._levels.pop(connection, None)
        self._ask_backends()

    def _ask_backends(self) -> None:
        """The backends log at the most verbose level a connected client asked for (it changes nothing when
        the last one leaves: the protocol has no way back to a backend's own default). Over HTTP they stay at
        the gateway's own level."""
        if not self._levels or self._own_level is not None:
            return
        wanted = min(self._levels.values(), key=severity)
        if wanted != self._asked:
            self._asked = wanted
            self._tell_backends(wanted)


class _PerSecond:
    """At most `limit` messages of each backend in each second; the count of the rest is logged once that
    backend's next second begins, or at `flush`."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seconds: dict[str, tuple[float, int]] = {}  # backend -> (its second's start, messages in it)

    def admits(self, backend: str) -> bool:
        now = time.monotonic()
        start, count = self._seconds.get(backend, (now, 0))
        if now - start >= 1.0:
            self._report(backend, count)
            start, count = now, 0
        self._seconds[backend] = (start, count + 1)
        return count < self._limit

    def flush(self) -> None:
        for backend, (_, count) in self._seconds.items():
            self._report(backend, count)
        self._seconds.clear()

    def _report(self, backend: str, count: int) -> None:
        if count > self._limit:
            logger.warning(
                "backend {!r} logged {} messages in one second that no single call owns: {} were not written "
                "(at most {} a second are)",
                backend,
                count,
                count - self._limit,
                self._limit,
            )
