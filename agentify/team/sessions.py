"""Each principal's MCP sessions on this replica: capped, their opening rate-limited, ended with the principal.

The SDK caps the sessions of the whole gateway (10,000), so one person opening sessions in a loop would
lock everyone out for as long as the sessions idle (30 minutes). Here each principal may hold at most
`server.maxSessionsPerPrincipal` open sessions (default 100) and open at most
`server.sessionOpensPerMinute` (default 300) in any minute; past either, that principal's new session is
refused with 429 and a `Retry-After`, and nobody else notices. The counts are this replica's: a 2025-11-25
session lives on the replica that opened it, where the balancer keeps sending it.

When a principal's token is removed from the tokens file, `end` ends its sessions (and with them their open
streams), so a removed person stops receiving by the time the file is read again.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class SessionCaps:
    """Which principal holds which session, and whether a principal may open one more."""

    def __init__(self, max_per_principal: int, opens_per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.max_per_principal = max_per_principal
        self.opens_per_minute = opens_per_minute
        self._clock = clock
        self._held: dict[str, set[str]] = {}
        self._opening: dict[str, int] = {}
        self._opened: dict[str, deque[float]] = {}
        self._owner: dict[str, str] = {}

    def refusal(self, principal: str) -> tuple[str, int] | None:
        """Why `principal` may not open a session now, and the seconds to wait; None when it may (it is then
        counted as opening until `admitted` or `settled`)."""
        now = self._clock()
        opened = self._opened.setdefault(principal, deque())
        while opened and opened[0] <= now - WINDOW_SECONDS:
            opened.popleft()
        if len(self._held.get(principal, ())) + self._opening.get(principal, 0) >= self.max_per_principal:
            return (
                f"{principal!r} has {self.max_per_principal} open sessions, the most one person may hold "
                "(server.maxSessionsPerPrincipal): end one (DELETE) or wait until one idles out",
                60,
            )
        if len(opened) >= self.opens_per_minute:
            wait = max(1, math.ceil(opened[0] + WINDOW_SECONDS - now))
            return (
                f"{principal!r} opened {self.opens_per_minute} sessions within a minute, the most one person may "
                f"(server.sessionOpensPerMinute): reuse a session, or try again in {wait} s",
                wait,
            )
        opened.append(now)
        self._opening[principal] = self._opening.get(principal, 0) + 1
        return None

    def admitted(self, principal: str, session: str) -> None:
        """The session the opening request of `principal` created (`settled` still follows)."""
        self._held.setdefault(principal, set()).add(session)
        self._owner[session] = principal

    def settled(self, principal: str) -> None:
        """The opening request has ended; it created a session (`admitted`) or not."""
        self._settle(principal)

    def ended(self, session: str) -> None:
        principal = self._owner.pop(session, None)
        if principal is None:
            return
        held = self._held.get(principal)
        if held is not None:
            held.discard(session)
            if not held:
                del self._held[principal]

    def sessions_of(self, principal: str) -> list[str]:
        return sorted(self._held.get(principal, ()))

    def principals(self) -> list[str]:
        return sorted(self._held)

    def _settle(self, principal: str) -> None:
        count = self._opening.get(principal, 0)
        if count <= 1:
            self._opening.pop(principal, None)
        else:
            self._opening[principal] = count - 1
