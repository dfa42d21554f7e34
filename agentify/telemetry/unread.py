"""Spans while nothing reads them: the ids and the sampled flag, without the recording.

With no exporter, no metrics, no console and no `traceFile`, recording a span (attributes, events,
span processors) is work nobody sees. A span then is OpenTelemetry's non-recording span with a new
span id in the current trace (a new trace at a root): results, log lines and the backend's
`traceparent` still carry the trace id, and the sampled flag is the parent's (a root's: sampled), so
a backend that traces decides as its parent-based sampler would have with a recording gateway.
A sampler cannot do this: a dropped span is always marked not sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    TraceFlags,
    Tracer,
    get_current_span,
    use_span,
)
from opentelemetry.util.types import Attributes


class ReadingProvider(TracerProvider):
    """The SDK's provider, whose tracers start non-recording spans while `reading()` says nothing reads."""

    def __init__(self, reading: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reading = reading
        self._wrapped: dict[int, tuple[Tracer, UnreadTracer]] = {}

    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        tracer = super().get_tracer(*args, **kwargs)
        if not hasattr(tracer, "sampler"):  # OTEL_SDK_DISABLED: the no-op tracer
            return tracer
        known = self._wrapped.get(id(tracer))  # the SDK keeps one tracer per scope
        if known is None or known[0] is not tracer:
            known = self._wrapped[id(tracer)] = (tracer, UnreadTracer(tracer, self.reading, self.id_generator))
        return known[1]


class UnreadTracer(Tracer):
    def __init__(self, tracer: Tracer, reading: Callable[[], bool], ids: IdGenerator) -> None:
        self._tracer = tracer
        self._reading = reading
        self._ids = ids

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if self._reading():
            return self._tracer.start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )
        parent = get_current_span(context).get_span_context()
        span_id = self._ids.generate_span_id()
        if parent.is_valid:
            own = SpanContext(parent.trace_id, span_id, False, parent.trace_flags, parent.trace_state)
        else:
            own = SpanContext(self._ids.generate_trace_id(), span_id, False, TraceFlags(TraceFlags.SAMPLED))
        return NonRecordingSpan(own)

    @contextmanager  # the API's own decorator is private; a plain context manager is what callers use
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
