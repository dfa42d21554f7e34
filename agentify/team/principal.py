"""Who made the request being served: the principal, set once per MCP request by the adapter that
authenticated it (mcp_server/server.py), read by everything that runs for the request.

It is the token's name (`server.auth` type `tokens`), the JWT's `sub` (`jwt`), `SHARED` for the one
shared token and `ANONYMOUS` for `--no-auth`; over stdio no request has one (the client is whoever
started agentify; rate limits count it as `LOCAL`). It lives in a context variable, so nothing passes
it along: spans carry it as `enduser.id` (setup.py), the console's traces and `traceFile` as
`principal` (read from that attribute), every log line as `principal=` (loguru's context), and the
rate limits count by it. Beside the name, `Who` carries the principal's groups and its token's scopes,
which access rules (`access.py`) read through `current_who`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from loguru import logger

LOCAL = "local"
SHARED = "shared-token"
ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Who:
    """A principal as access decisions see it: its name, its groups and its token's scopes."""

    name: str
    groups: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()


_PRINCIPAL: ContextVar[str | None] = ContextVar("agentify.principal", default=None)
_WHO: ContextVar[Who | None] = ContextVar("agentify.who", default=None)
_INBOUND: ContextVar[str | None] = ContextVar("agentify.inbound_token", default=None)


def current_principal() -> str | None:
    """The principal of the request this task serves, or None (stdio, or outside a request).

    Called when each span starts, in the request's own context: a context variable is cheap enough."""
    return _PRINCIPAL.get()


def current_who() -> Who:
    """The principal of the request this task serves with its groups and scopes; `LOCAL` outside a request."""
    return _WHO.get() or Who(_PRINCIPAL.get() or LOCAL)


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
def acting_for(
    principal: str,
    *,
    groups: frozenset[str] = frozenset(),
    scopes: frozenset[str] = frozenset(),
    token: str | None = None,
) -> Iterator[None]:
    """Everything inside runs, and logs, as `principal` (in `groups`, with `scopes`); `token`: the verified token
    the request came with (for the token exchange only)."""
    mark = _PRINCIPAL.set(principal)
    who = _WHO.set(Who(principal, groups, scopes))
    held = _INBOUND.set(token)
    try:
        with logger.contextualize(principal=principal):
            yield
    finally:
        _INBOUND.reset(held)
        _WHO.reset(who)
        _PRINCIPAL.reset(mark)
