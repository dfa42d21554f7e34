"""One replica's life as a load balancer sees it: health, readiness, and the drain on SIGTERM.

`GET /healthz` answers 200 while the process serves; `GET /readyz` 200 when every eager backend is
ready, else 503 with each backend's state. Both need no token and show no secret (backend ids and
states only). On SIGTERM the replica drains (`Replica.drain`): `/readyz` answers 503 at once, and
new work gets 503 with `Retry-After` and `Connection: close` (the balancer retries it on another
replica): a new 2025-11-25 session, a 2026-07-28 request, a session this replica does not hold.
What still passes: every request of a 2025-11-25 session this replica holds (it lives nowhere
else, so sending it elsewhere would lose it), a client's answer to the gateway's question, a
notification such as a cancellation. Telling them apart needs the request's body: the gate
(`DrainGate`) sits behind the bearer check and `BodyLimit` (serving.py), so a request without a valid
token is refused before its body is read, and a body that has not come whole within 10 s is refused
(408). The drain ends when no request is in flight, no session is held and the balancer has stopped
sending work (`QUIET_SECONDS` without a request), or after `server.drainSeconds`; then the server stops.

Which sessions are held is told by the SDK's session manager itself (`http_app`): a session is held from
when it is admitted until the manager discards it (its client's DELETE, its idle timeout, an opening that
failed). A 404 for somebody else's session id ends nothing: the manager answers so to a credential that
did not open the session, while the session goes on.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import anyio
from loguru import logger

Scope = MutableMapping[str, Any]
HEALTH_PATHS = ("/healthz", "/readyz")
_DRAIN_BODY_BYTES = 16 * 1024 * 1024
_SERVING = ("ready", "idle")
_SESSION_HEADER = b"mcp-session-id"
QUIET_SECONDS = 1.0
"""Without a request for this long, the balancer has taken a draining replica out (it stopped sending after
/readyz said 503): stopping earlier could close the listening socket on a connection it just opened."""


class BackendReadiness(NamedTuple):
    """A backend as readiness sees it: its state's name, and whether the replica is ready only once it is
    (an enabled eager backend)."""

    id: str
    state: str
    required: bool


class Replica:
    """The drain switch, the count of MCP requests being handled, and the 2025-11-25 sessions held."""

    def __init__(self, quiet_seconds: float = QUIET_SECONDS) -> None:
        self.draining = False
        self._quiet_seconds = quiet_seconds
        self._in_flight = 0
        self._sessions: set[str] = set()  # the Mcp-Session-Id of each session held
        self._last_request = time.monotonic()
        self._changed = anyio.Event()
        self.statuses: Callable[[], list[BackendReadiness]] | None = None
        """The backends' states, once the gateway's services are open (readiness)."""

    @asynccontextmanager
    async def handling(self) -> AsyncIterator[None]:
        """Around one MCP request's handler: the drain waits for it."""
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._change()

    @property
    def sessions_held(self) -> int:
        return len(self._sessions)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def holds(self, session: str) -> bool:
        """Whether the session lives here (and so may not be sent elsewhere)."""
        return session in self._sessions

    def opened(self, session: str) -> None:
        """The session manager admitted the session."""
        self._sessions.add(session)

    def ended(self, session: str) -> None:
        """The session manager discarded the session (it may say so more than once)."""
        if session in self._sessions:
            self._sessions.discard(session)
            self._change()

    def requested(self) -> None:
        """A request came (the balancer still sends work here)."""
        self._last_request = time.monotonic()

    async def drain(self, seconds: float) -> None:
        """Refuses new work from now on; returns when nothing is left to finish (see the module docstring),
        or after `seconds`."""
        self.draining = True
        logger.info(
            "draining: /readyz answers 503, new work gets 503; {} in flight, {} sessions held",
            self._in_flight,
            len(self._sessions),
        )
        with anyio.move_on_after(seconds) as waited:
            while (wait := self._left_to_wait()) > 0:
                with anyio.move_on_after(wait):
                    await self._changed.wait()
        if waited.cancelled_caught:
            logger.warning(
                "{} requests still in flight and {} sessions held after {:g} s (server.drainSeconds): stopping",
                self._in_flight,
                len(self._sessions),
                seconds,
            )
        else:
            logger.info("drained: no request in flight, no session held")

    def _left_to_wait(self) -> float:
        """0 once drained; else how long until it may be (infinite: until something changes)."""
        if self._in_flight or self._sessions:
            return math.inf
        return self._last_request + self._quiet_seconds - time.monotonic()

    def _change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def readiness(self) -> tuple[int, dict[str, Any]]:
        if self.draining:
            return 503, {"status": "draining"}
        if self.statuses is None:
            return 503, {"status": "starting"}
        statuses = self.statuses()
        backends = {s.id: s.state for s in statuses}
        # An eager backend stopped after idleStopSeconds starts again on its next call: ready enough.
        ready = all(s.state in _SERVING for s in statuses if s.required)
        return (200 if ready else 503), {"status": "ready" if ready else "not_ready", "backends": backends}


class ReplicaRoutes:
    """ASGI, outermost: the health routes in front of everything else (auth included: a probe has no token).
    Other paths and lifespan pass through to `app`; with `gate`, through the drain gate first (`DrainGate`;
    serving puts it inside the bearer check instead, so that a token is checked before a body is read)."""

    def __init__(self, app: Any, replica: Replica, public: dict[str, Any] | None = None, *, gate: bool = True) -> None:
        self._app = DrainGate(app, replica) if gate else app
        self._replica = replica
        self._public = public or {}  # more routes without a token (the OAuth metadata)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path = scope["path"]
        if path in HEALTH_PATHS:
            status, body = (200, {"status": "ok"}) if path == "/healthz" else self._replica.readiness()
            await _json(send, status, body)
        elif path in self._public:
            await self._public[path](scope, receive, send)
        else:
            self._replica.requested()
            await self._app(scope, receive, send)


class DrainGate:
    """ASGI: while the replica drains, new work gets 503 (see the module docstring). Deciding needs the body
    of a request that is not a held session's: put it behind the token check and `BodyLimit`."""

    def __init__(self, app: Any, replica: Replica) -> None:
        self._app = app
        self._replica = replica

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self._replica.draining:
            await self._app(scope, receive, send)
            return
        session = _header(scope, _SESSION_HEADER)
        if session is not None and self._replica.holds(session):
            await self._app(scope, receive, send)
        else:
            await self._while_draining(scope, receive, send)

    async def _while_draining(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["method"] == "DELETE":
            await self._app(scope, receive, send)
            return
        body = await _body(receive) if scope["method"] == "POST" else None
        if body is None or _starts_work(body):
            await _json(send, 503, _DRAINING, retry_after=1)
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()  # the disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)


_DRAINING = {
    "error": "draining",
    "error_description": "this agentify replica is shutting down: send the request again (another replica takes it)",
}


def _starts_work(body: bytes) -> bool:
    """Whether a POST body holds a JSON-RPC request (new work); answers and notifications do not."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return True
    messages = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in messages) or not messages


async def _body(receive: Any) -> bytes | None:
    """The whole request body; None past _DRAIN_BODY_BYTES or when the client went away."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > _DRAIN_BODY_BYTES:
            return None
        if not message.get("more_body"):
            return b"".join(chunks)


def _header(scope_or_message: Mapping[str, Any], name: bytes) -> str | None:
    value = next((v for k, v in scope_or_message.get("headers", ()) if k.lower() == name), None)
    return value.decode("latin-1") if value is not None else None


async def _json(send: Any, status: int, body: dict[str, Any], retry_after: int | None = None) -> None:
    """`retry_after`: a refusal to retry elsewhere; the connection closes with it, so that neither a
    balancer nor a client sends the retry over a connection to this replica."""
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    headers.append((b"cache-control", b"no-store"))
    if retry_after is not None:
        headers += [(b"retry-after", str(retry_after).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
