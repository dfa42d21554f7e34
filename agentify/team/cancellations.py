"""Cancellations that reach the replica running the call, whichever replica they reach first.

A client's `notifications/cancelled` is a POST of its own. A 2025-11-25 one carries the session's id, and
HAProxy sends it where the session lives, unless it lost track of it (its stick table expired, another
HAProxy); a 2026-07-28 one carries no session, so HAProxy sends it round robin (the official SDKs cancel
by closing the call's own response stream, which reaches the right replica; other clients still POST the
notification, which the SDK acknowledges and drops). With `server.redis` each replica books the requests
it runs that reach a backend (`CallBook`; which ones: `mcp_server/remote_cancels.py`) under a key made of
the caller's principal, the session (none in 2026-07-28) and the request id, so a cancel can only ever name
its own principal's call. A cancel for a call this replica does
not hold is published on one Redis channel (`CancelChannel`, over the same password-protected connection
as everything else kept there); the replica holding it cancels the call, and the backend gets its own
`notifications/cancelled` as when the client's cancel arrives where the call runs.

Nothing is kept per cancel: the book holds the calls in flight only (each leaves it as it ends), a cancel
for nothing is dropped, and a message is a fixed-size hash (no principal name, no id in Redis). Without
`server.redis` nothing here runs. A request of an anonymous principal (`--no-auth`) or of the one shared token is
not booked: with no one to tell callers apart, anyone could cancel anyone's call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
from loguru import logger
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from agentify._common.background import background
from agentify.security.bodies import replayed
from agentify.team.bearer import principal_of
from agentify.team.principal import ANONYMOUS, SHARED
from agentify.team.redis_link import REDIS_SECONDS, RedisLink, redis_link

CHANNEL = "agentify:cancel"
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""How long the listener waits before subscribing again after Redis went away, growing to the last."""
MAX_ID_CHARS = 200
"""A request id longer than this is no id any client sends: its cancel is not relayed."""
UNBOOKED = (ANONYMOUS, SHARED)
"""Principals whose calls are not booked: `--no-auth` and the one shared token stand for anyone, so their
request ids (small numbers in every client) would let one client cancel another's call."""
_MARK = b"notifications/cancelled"
_SESSION_HEADER = b"mcp-session-id"


def call_key(principal: str, session: str | None, request_id: str | int) -> str:
    """The key of one call: a sha256 (hex) over who called, in which session (none: 2026-07-28) and the id."""
    return hashlib.sha256(json.dumps([principal, session, str(request_id)]).encode()).hexdigest()


class CallBook:
    """The calls this replica runs, each with the cancel scope that ends it."""

    def __init__(self) -> None:
        self._running: dict[str, list[anyio.CancelScope]] = {}

    @contextmanager
    def running(self, key: str) -> Iterator[anyio.CancelScope]:
        """The call's scope, booked under `key` while the body runs; leaves the book when the body ends."""
        scope = anyio.CancelScope()
        scopes = self._running.setdefault(key, [])
        scopes.append(scope)
        try:
            with scope:
                yield scope
        finally:
            scopes.remove(scope)
            if not scopes:
                del self._running[key]

    def cancel(self, key: str) -> bool:
        """Cancels the calls booked under `key`; False when there is none here."""
        scopes = self._running.get(key, [])
        for scope in scopes:
            scope.cancel()
        return bool(scopes)

    def __len__(self) -> int:
        return sum(len(scopes) for scopes in self._running.values())


class CancelChannel:
    """The cancels replicas tell each other, on one Redis channel: each is one call's key."""

    def __init__(self, link: RedisLink, book: CallBook) -> None:
        self.book = book
        self.subscribed = anyio.Event()
        """Set once the channel is first heard (a cancel published before that reaches no one)."""
        self._link = link
        self._failures = 0

    async def publish(self, key: str) -> None:
        """Tells every replica; when Redis cannot be reached the cancel is lost (the call runs to its end)."""
        try:
            with anyio.fail_after(REDIS_SECONDS):
                await self._link.client.publish(CHANNEL, key.encode())
        except self._link.unreachable as exc:
            logger.warning(
                "a cancel could not be passed to the other replicas: {} cannot be reached ({}); the call it names "
                "runs to its end",
                self._link.where,
                type(exc).__name__,
            )

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """Cancels the calls of this replica that other replicas were asked to cancel, while the body runs."""
        try:
            async with background() as tg:
                tg.start_soon(self._listen)
                yield
        finally:  # after the listener stopped: closing under it would read as Redis gone
            await self._link.aclose()

    async def _listen(self) -> None:
        while True:
            try:
                await self._subscribed()
            except self._link.unreachable as exc:
                wait = RETRY_SECONDS[min(self._failures, len(RETRY_SECONDS) - 1)]
                if self._failures == 0:
                    logger.warning(
                        "cancels from other replicas are not heard: {} cannot be reached ({}); trying again",
                        self._link.where,
                        type(exc).__name__,
                    )
                self._failures += 1
                await anyio.sleep(wait)

    async def _subscribed(self) -> None:
        """Hears the channel until Redis goes away (raises one of `unreachable`)."""
        pubsub = self._link.client.pubsub()
        try:
            with anyio.fail_after(REDIS_SECONDS):
                await pubsub.subscribe(CHANNEL)
            self.subscribed.set()
            if self._failures:
                logger.info("cancels from other replicas are heard again ({})", self._link.where)
                self._failures = 0
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=REDIS_SECONDS / 2)
                if message is not None and message.get("type") == "message":
                    self._heard(message.get("data"))
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(REDIS_SECONDS):
                await pubsub.aclose()

    def _heard(self, data: Any) -> None:
        key = data.decode("ascii", "replace") if isinstance(data, bytes) else ""
        if len(key) == 64 and self.book.cancel(key):
            logger.info("a call was cancelled by its client through another replica")


def cancel_channel(url: str | None) -> CancelChannel | None:
    """The channel of `server.redis`; None without it (then nothing changes)."""
    return CancelChannel(redis_link(url), CallBook()) if url else None


class CancelRelay:
    """In front of the MCP endpoint (behind the token check and the body cap, which hands the body over whole):
    a POSTed `notifications/cancelled` that the SDK would drop (2026-07-28, no session) or refuse (a 2025-11-25
    session this replica does not hold) cancels the call here, or goes to the other replicas, and is answered
    202 as the SDK answers a notification. Everything else passes as it came. `holds(session)`: whether this
    replica serves that 2025-11-25 session (then the SDK cancels the call itself); `path`: the MCP endpoint's."""

    def __init__(self, app: ASGIApp, channel: CancelChannel, holds: Callable[[str], bool], path: str) -> None:
        self.app = app
        self.channel = channel
        self.holds = holds
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        first = await receive()
        body = first.get("body", b"") if first["type"] == "http.request" and not first.get("more_body") else b""
        request_id = _cancelled_id(body) if _MARK in body else None
        session = _header(scope, _SESSION_HEADER)
        principal = principal_of(Request(scope), ANONYMOUS) if request_id is not None else ANONYMOUS
        if request_id is None or principal in UNBOOKED or (session is not None and self.holds(session)):
            await self.app(scope, replayed([first], receive), send)
            return
        key = call_key(principal, session, request_id)
        if not self.channel.book.cancel(key):
            await self.channel.publish(key)
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def _cancelled_id(body: bytes) -> str | int | None:
    """The `requestId` of a `notifications/cancelled` body; None for any other body."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled" or "id" in message:
        return None
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return request_id if len(str(request_id)) <= MAX_ID_CHARS else None


def _header(scope: Scope, name: bytes) -> str | None:
    value = next((v for k, v in scope.get("headers", []) if k.lower() == name), None)
    return value.decode("latin-1") if value is not None else None
