"""What the console shows of the gateway's governance: the tools `pinning` withholds or flags, and the
recent audit records. Both are optional services the gateway may carry (`services.pins`,
`services.audit`); a gateway without them (today's, or one without `pinning`/`audit` configured)
is shown as "not enabled", never as an error.

The protocols are the whole seam: the gateway's pin store and audit log satisfy them, and the console
reads them only through `pins_of` and `audit_of`. What they return is plain JSON-ready data; the
console redacts it at its sink (`Views`) like everything else it serves.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class PinReview(Protocol):
    """The tools `pinning` did not accept as they are now, and how a person accepts them."""

    def changed_tools(self) -> list[dict[str, Any]]:
        """Each tool withheld (`enforce`) or flagged (`warn`): `backend`, `tool`, `reason` (what changed, in
        words), `difference` (a unified diff of the recorded and the current tool, text), `withheld` (bool)."""
        ...

    async def approve(self, backend: str, tool: str | None = None) -> int:
        """Accepts the current form of the backend's tools (or of one tool); returns how many were accepted.

        Raises:
            KeyError: the backend (or the tool) has nothing to approve.
        """
        ...


@runtime_checkable
class AuditTrail(Protocol):
    """The audit log's newest records, as their JSON lines hold them."""

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """At most `limit` records, newest first."""
        ...


def pins_of(services: object) -> PinReview | None:
    """The gateway's pin review, or None when it has none (pinning off, or a gateway without it)."""
    pins = getattr(services, "pins", None)
    return pins if isinstance(pins, PinReview) else None


def audit_of(services: object) -> AuditTrail | None:
    """The gateway's audit trail, or None when it has none (no `audit` configured)."""
    audit = getattr(services, "audit", None)
    return audit if isinstance(audit, AuditTrail) else None
