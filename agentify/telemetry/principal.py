"""Who made the request being served: spans carry it as `enduser.id`.

The HTTP auth of the team gateway (per-person tokens, JWTs) names a principal per request: the
token's name or the JWT's `sub`. Until that lands, no request has one.
"""

from __future__ import annotations


def current_principal() -> str | None:
    """The principal of the request this task serves, or None (stdio, the shared token, no request).

    Called when each span starts, in the request's own context: reading a context variable that the
    auth middleware sets is cheap enough."""
    return None
