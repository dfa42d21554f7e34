"""Who made the request being served: the principal, set once per MCP request by the adapter that
authenticated it (mcp_server/server.py), read by everything that runs for the request.

It is the token's name (`server.auth` type `tokens`), the JWT's `sub` (`jwt`), `SHARED` for the one
shared token and `ANONYMOUS` for `--no-auth`; over stdio no request has one (the client is whoever
started agentify; rate limits count it as `LOCAL`). It lives in a context variable, so nothing passes
it along: spans carry it as `enduser.id` (setup.py), the console's traces and `traceFile` as
`principal` (read from that attribute), every log line as `principal=` (loguru's context), and the
rate limits count by it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from loguru import logger

LOCAL = "local"
SHARED = "shared-token"
ANONYMOUS = "anonymous"

_PRINCIPAL: ContextVar[str | None] = ContextVar("agentify.principal", default=None)
_INBOUND: ContextVar[str | None] = ContextVar("agentify.inbound_token", default=None)


def current_principal() -> str | None:
    """The principal of the request this task serves, or None (stdio, or outside a request).

    Called when each span starts, in the request's own context: a context variable is cheap enough."""
    return _PRINCIPAL.get()


def inbound_token() -> str | None:
    """The verified bearer token the request being served came with (a JWT of `server.auth` type `jwt`), for
    the token exchange (`backends/exchange.py`) only: it is never logged, shown, or sent anywhere as it is."""
    return _INBOUND.get()


def verified_token(request: Any) -> str | None:
    """The access token the SDK's bearer check verified for `request` (the HTTP request a handler gets)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    user = request.scope.get("user") if request is not None else None
    return user.access_token.token if isinstance(user, AuthenticatedUser) else None


@contextmanager
def acting_for(principal: str, token: str | None = None) -> Iterator[None]:
    """Everything inside runs, and logs, as `principal`; `token`: the verified token it came with."""
    mark = _PRINCIPAL.set(principal)
    held = _INBOUND.set(token)
    try:
        with logger.contextualize(principal=principal):
            yield
    finally:
        _INBOUND.reset(held)
        _PRINCIPAL.reset(mark)
