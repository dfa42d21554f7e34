"""The audit's lines as OTLP log records (team/audit.py writes them; `Telemetry.logs` exports them).

Each record's body is the line exactly as written, so whoever receives the logs can check the chain
on their copy (`agentify audit verify` reads it from a file); the fields that a search filters on are
attributes as well. Nothing in a line is secret: it names who did what, never with which values.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentify import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider

EVENT = "agentify.audit"
_ATTRIBUTES = ("replica", "principal", "client", "operation", "target", "decision", "outcome", "traceId")


def audit_export(provider: LoggerProvider) -> Any:
    """What `AuditLog` hands each written line to (its `Export`)."""
    from opentelemetry._logs import SeverityNumber

    logger = provider.get_logger(EVENT, __version__)

    def export(line: str, fields: Mapping[str, Any]) -> None:
        attributes = {f"agentify.audit.{key}": fields[key] for key in _ATTRIBUTES if fields.get(key) is not None}
        logger.emit(
            timestamp=time.time_ns(),
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=line,
            attributes=attributes,
            event_name=EVENT,
        )

    return export
