"""One replica's life as a load balancer sees it: health, readiness, and the drain on SIGTERM.

`GET /healthz` answers 200 while the process serves; `GET /readyz` 200 when every eager backend is
ready, else 503 with each backend's state. Both need no token and show no secret (backend ids and
states only). On SIGTERM the replica drains (`Replica.drain`): `/readyz` answers 503 at once, a new
MCP request gets 503 (the balancer sends it elsewhere), and the calls in flight finish, bounded by
`server.drainSeconds`; then the server stops. What is not a new request still passes while
draining: a client's answer to the gateway's question (a JSON-RPC response that a call in flight
waits for), a notification such as a cancellation, and the end of a session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from loguru import logger

from agentify.backends import BackendStatus
from agentify.backends.state import BackendState

Scope = dict[str, Any]
HEALTH_PATHS = ("/healthz", "/readyz")
_DRAIN_BODY_BYTES = 16 * 1024 * 1024
_SERVING = (BackendState.READY, BackendState.IDLE)


class Replica:
    """The drain switch and the count of MCP requests being handled."""

    def __init__(self) -> None:
        self.draining = False
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.statuses: Callable[[], list[BackendStatus]] | None = None
        """The backends' states, once the gateway's services are open (readiness)."""

    @asynccontextmanager
    async def handling(self) -> AsyncIterator[None]:
        """Around one MCP request's handler: the drain waits for it."""
        self._in_flight += 1
        self._idle = anyio.Event() if self._in_flight == 1 else self._idle
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def drain(self, seconds: float) -> None:
        """Refuses new requests from now on; returns when none is in flight, or after `seconds`."""
        self.draining = True
        logger.info("draining: /readyz answers 503, new requests get 503; {} in flight", self._in_flight)
        with anyio.move_on_after(seconds) as waited:
            await self._idle.wait()
        if waited.cancelled_caught:
            logger.warning(
                "{} requests still in flight after {:g} s (server.drainSeconds): stopping", self._in_flight, seconds
            )
        else:
            logger.info("drained: no request in flight")

    def readiness(self) -> tuple[int, dict[str, Any]]:
        if self.draining:
            return 503, {"status": "draining"}
        if self.statuses is None:
            return 503, {"status": "starting"}
        statuses = self.statuses()
        backends = {s.id: s.state.value for s in statuses}
        # An eager backend stopped after idleStopSeconds starts again on its next call: ready enough.
        ready = all(s.state in _SERVING for s in statuses if s.enabled and s.start == "eager")
        return (200 if ready else 503), {"status": "ready" if ready else "not_ready", "backends": backends}


class ReplicaRoutes:
    """ASGI, outermost: the health routes and the drain gate in front of everything else (auth included:
    a probe has no token). Other paths and lifespan pass through to `app`."""

    def __init__(self, app: Any, replica: Replica, public: dict[str, Any] | None = None) -> None:
        self._app = app
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
        elif self._replica.draining:
            await self._while_draining(scope, receive, send)
        else:
            await self._app(scope, receive, send)

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


async def _json(send: Any, status: int, body: dict[str, Any], retry_after: int | None = None) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    headers.append((b"cache-control", b"no-store"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
