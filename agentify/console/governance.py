"""What the console shows of the gateway's governance: the tools `pinning` withholds or flags, and the
recent audit records. Both are optional services the gateway may carry (`services.pins`, the gateway's
`PinBook`; `services.audit`, the audit chain this process writes); a gateway without them, or with
`pinning` off, is shown as "not enabled", never as an error.

The protocols are the whole seam: the gateway's pin store and audit log satisfy them, and the console
reads them only through `pins_of` and `audit_of`. What they return is plain JSON-ready data; the
console redacts it at its sink (`Views`) like everything else it serves.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class PinReview(Protocol):
    """The tools `pinning` did not accept as they are now, and how a person accepts them."""

    mode: str
    """`off`, `warn` or `enforce` (the config's `pinning`): with `off` the console shows pinning as not enabled."""

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
    """The gateway's pin review, or None when it has none or pinning is `off` (read now: a reload may change it)."""
    pins = getattr(services, "pins", None)
    return pins if isinstance(pins, PinReview) and pins.mode != "off" else None


def audit_of(services: object) -> AuditTrail | None:
    """The gateway's audit trail, or None when it has none (no `audit` configured)."""
    audit = getattr(services, "audit", None)
    return audit if isinstance(audit, AuditTrail) else None
