"""What leaves the process: every span is redacted (attributes, event attributes, the status text)
before it is queued for an exporter, and content attributes (`names.CONTENT`) are dropped unless
`otel.captureContent` is set.

The copy is made when the span ends, on the thread that ended it, so the batch queue never holds a
secret nor a megabyte of a tool's result; spans the sampler did not sample are neither copied nor
queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import Status
from opentelemetry.util.types import Attributes

from agentify.security.redact import Redactor
from agentify.telemetry.names import CLOSED, CONTENT

VALUE_LIMIT = 2000
"""Characters kept of any one exported string (after redaction, never before)."""


class Sanitized(SpanProcessor):
    """Hands `inner` (a batch processor with its exporter) redacted copies of the sampled spans."""

    def __init__(self, inner: SpanProcessor, redactor: Redactor, *, capture_content: bool) -> None:
        self._inner = inner
        self._redactor = redactor
        self._capture_content = capture_content

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: the copy is made once the span has all its attributes."""

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None or not span.context.trace_flags.sampled:
            return
        self._inner.on_end(self.copy(span))

    def copy(self, span: ReadableSpan) -> ReadableSpan:
        status = span.status
        if status.description:
            status = Status(status.status_code, self._redactor.bounded(status.description, VALUE_LIMIT))
        return ReadableSpan(
            name=self._redactor.bounded(span.name, VALUE_LIMIT),
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=self._attributes(span.attributes),
            events=[Event(e.name, self._attributes(e.attributes), e.timestamp) for e in span.events],
            links=span.links,
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def _attributes(self, attributes: Attributes) -> dict[str, Any]:
        kept: Mapping[str, Any] = attributes or {}
        if not self._capture_content:
            kept = {k: v for k, v in kept.items() if k not in CONTENT}
        return {k: v if k in CLOSED else self._value(v) for k, v in kept.items()}

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redactor.bounded(value, VALUE_LIMIT)
        if isinstance(value, tuple | list):
            return tuple(self._value(v) for v in value)
        return value
