"""A backend's log messages (`notifications/message`) and the levels they are asked at.

A message that comes while exactly one call of the session is in flight is that call's, and goes to
the call's `LogSink` (or nowhere, when its client asked for no logs). Nothing on the wire says which
call a message belongs to (over stdio; the SDK's client does not say over HTTP either), so each call
leases a session of its own (`pool.py`); a message that comes with no call (or several, on a session
calls share) goes to the backend's `LogListener`: the clients that asked for logs outside calls.

How the level reaches a backend depends on its session's era: a 2026-07-28 session has no
`logging/setLevel`; each call carries its client's level in `_meta` (`io.modelcontextprotocol/logLevel`)
and the backend logs only for calls that carry one. A 2025-11-25 session has one level for everyone, set
with `logging/setLevel`; the gateway sets it to the most verbose level a client asked for, and each
client's own level is applied when the gateway relays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, get_args

import mcp_types as types

LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
"""From the least severe (`debug`) to the most (`emergency`), as the protocol orders them."""

LogListener = Callable[[str, types.LoggingMessageNotificationParams], None]
"""(backend id, message) of a message no single call owns; called synchronously, it must not block."""


def severity(level: str) -> int:
    """The rank of a level; an unknown one ranks as the most severe (so it is never filtered away)."""
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)  # type: ignore[arg-type]


class LogSink(Protocol):
    """Where the log messages of one call go (the call's client)."""

    @property
    def level(self) -> types.LoggingLevel:
        """The least severe level the call's client asked for."""
        ...

    def heard(self, backend: str, params: types.LoggingMessageNotificationParams) -> None:
        """One message of the call; called synchronously in the order they came, it must not block."""
        ...
