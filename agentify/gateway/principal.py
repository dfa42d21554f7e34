"""Who a request acts for: the principal, set once per MCP request by the adapter that authenticated it.

It is the token's name (`tokens`), the JWT's `sub` (`jwt`), `SHARED` for the one shared token,
`ANONYMOUS` for `--no-auth` and `LOCAL` over stdio, where the client is whoever started agentify.
The value lives in a context variable, so everything that runs for the request sees it without
passing it along: the task's trace (`principal` in its dict), every log line (`principal=` through
loguru's context), the rate limits, and any tracing that reads `current_principal()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from loguru import logger

LOCAL = "local"
SHARED = "shared-token"
ANONYMOUS = "anonymous"

_PRINCIPAL: ContextVar[str | None] = ContextVar("agentify.principal", default=None)


def current_principal() -> str | None:
    """The principal of the request being served (None outside of one: start-up, the console's own work)."""
    return _PRINCIPAL.get()


@contextmanager
def acting_for(principal: str) -> Iterator[None]:
    """Everything inside runs, and logs, as `principal`."""
    token = _PRINCIPAL.set(principal)
    try:
        with logger.contextualize(principal=principal):
            yield
    finally:
        _PRINCIPAL.reset(token)
