"""The tracer provider of a process, and the exporters that the standard `OTEL_*` variables ask for.

Spans are recorded while something reads them, exported or not: the console and `traceFile` read
the same spans through `Telemetry.attached` (one tracing, not two); with no reader, spans keep their
ids but record nothing (`unread.py`). With `OTEL_EXPORTER_OTLP_ENDPOINT` (or the
`..._TRACES_ENDPOINT` / `..._METRICS_ENDPOINT` / `..._LOGS_ENDPOINT` variant) set, spans, the
operation-duration metrics and the audit's lines (`logs`: team/audit.py hands them to `audit_logs`) are
also exported over OTLP/HTTP; the exporter reads the rest of the standard variables itself
(headers, timeout, compression, certificates). `OTEL_SDK_DISABLED=true` turns all of it off, the
console's traces included. The resource is `service.name=agentify` and a `service.instance.id` per
process, unless `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` say otherwise.

Exporters run on the SDK's daemon threads; `flush` and `shutdown` wait for them at most
`FLUSH_SECONDS`, so a collector that is down never holds up an exit.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loguru import logger
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Tracer
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from agentify import __version__
from agentify._common.logging import route_stdlib
from agentify.security.redact import Redactor
from agentify.team.principal import current_principal
from agentify.telemetry.export import Sanitized
from agentify.telemetry.names import ENDUSER, SCOPE, TRANSPORT
from agentify.telemetry.unread import ReadingProvider

if TYPE_CHECKING:  # the metrics SDK costs more to import than the tracing one: loaded when exported
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader

FLUSH_SECONDS = 2.0


@dataclass(frozen=True)
class Telemetry:
    provider: ReadingProvider
    meters: MeterProvider | None = None
    exported: tuple[str, ...] = ()
    """What goes to a collector: "traces", "metrics", "logs"."""
    _sinks: _Sinks = field(default_factory=lambda: _Sinks())
    logs: LoggerProvider | None = None
    """The audit's lines as OTLP logs, when exported."""

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer(SCOPE, __version__)

    def reading(self) -> bool:
        """Whether spans are recorded now (an exporter, the metrics, or an attached sink reads them): when
        not, callers skip the spans and attributes that only a reader would see."""
        return self.provider.reading()

    @contextmanager
    def attached(self, sink: SpanProcessor) -> Iterator[None]:
        """`sink` sees every span that starts and ends while attached (the console's trace store)."""
        self._sinks.add(sink)
        try:
            yield
        finally:
            self._sinks.remove(sink)

    def install(self) -> None:
        """Makes this the process's global provider, which the SDK's server and client spans use.
        Once per process: OpenTelemetry refuses to replace a global provider."""
        trace.set_tracer_provider(self.provider)
        if self.meters is not None:
            from opentelemetry import metrics

            metrics.set_meter_provider(self.meters)

    def flush(self, seconds: float = FLUSH_SECONDS) -> None:
        """Exports what is queued, waiting at most `seconds` (blocking: call it off the event loop)."""

        def flush() -> None:
            self.provider.force_flush()
            if self.meters is not None:
                self.meters.force_flush()
            if self.logs is not None:
                self.logs.force_flush()

        _bounded(flush, seconds)

    def shutdown(self, seconds: float = FLUSH_SECONDS) -> None:
        def shutdown() -> None:
            self.provider.shutdown()
            if self.meters is not None:
                self.meters.shutdown()
            if self.logs is not None:
                self.logs.shutdown()

        _bounded(shutdown, seconds)


def open_telemetry(
    redactor: Redactor,
    *,
    capture_content: bool = False,
    transport: str | None = None,
    environ: Mapping[str, str] = os.environ,
    exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
    audit: bool = False,
) -> Telemetry:
    """The provider for this process. `transport` is how it serves MCP ("pipe" for stdio, "tcp" for
    HTTP; None when it serves nothing). `exporter` and `metric_reader` replace what the environment
    asks for (tests use the SDK's in-memory ones). `audit`: the process writes an audit (`server.audit`),
    whose lines are exported as logs when the variables ask for logs."""
    route_stdlib("opentelemetry", "OpenTelemetry")  # an exporter's complaints, through the redacting sink
    resource = _resource()
    exported: list[str] = []
    processor: SpanProcessor | None = None
    if exporter is not None:
        processor = SimpleSpanProcessor(exporter)
    elif _wanted("traces", environ):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter())
        exported.append("traces")
    if metric_reader is None and _wanted("metrics", environ):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        metric_reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        exported.append("metrics")
    sinks = _Sinks()
    always = processor is not None or metric_reader is not None
    provider = ReadingProvider(
        lambda: always or bool(sinks), resource=resource, sampler=_RecordEverything(), shutdown_on_exit=False
    )
    provider.add_span_processor(_RequestAttributes(transport))
    provider.add_span_processor(sinks)
    meters = None
    if metric_reader is not None:
        from opentelemetry.sdk.metrics import MeterProvider

        from agentify.telemetry.metrics import OperationDurations

        meters = MeterProvider(metric_readers=[metric_reader], resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(OperationDurations(meters.get_meter(SCOPE, __version__)))
    if processor is not None:
        provider.add_span_processor(Sanitized(processor, redactor, capture_content=capture_content))
    logs = None
    if audit and exporter is None and _wanted("logs", environ):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
        exported.append("logs")
    if exported:
        logger.info(
            "exporting {} over OTLP/HTTP as service.instance.id {}{}",
            " and ".join(exported),
            resource.attributes.get("service.instance.id"),
            " (with arguments and results: otel.captureContent)" if capture_content else "",
        )
    return Telemetry(provider, meters, tuple(exported), sinks, logs)


def _resource() -> Resource:
    """agentify's defaults, under what `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` say."""
    defaults = {"service.name": "agentify", "service.version": __version__, "service.instance.id": uuid.uuid4().hex}
    return Resource.create(defaults | dict(OTELResourceDetector().detect().attributes))


def _wanted(signal: str, environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for OTLP export of `signal` ("traces", "metrics" or "logs")."""
    upper = signal.upper()
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    chosen = environ.get(f"OTEL_{upper}_EXPORTER", "otlp").strip().lower()
    endpoint = environ.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if chosen == "none" or not endpoint:
        return False
    if chosen != "otlp":
        logger.warning("OTEL_{}_EXPORTER={}: agentify exports OTLP only; using otlp", upper, chosen)
    protocol = environ.get(f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip().lower() != "http/protobuf":
        logger.warning(
            "OTEL_EXPORTER_OTLP_PROTOCOL={}: agentify exports OTLP over HTTP (http/protobuf) only; "
            "point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (usually 4318)",
            protocol,
        )
    return True


def _bounded(work: Callable[[], Any], seconds: float) -> None:
    worker = threading.Thread(target=work, name="agentify-telemetry-flush", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        logger.warning("the OpenTelemetry exporter did not finish within {:g} s: what it had not sent is lost", seconds)


class _Sinks(SpanProcessor):
    """Hands spans to the sinks attached now, each once however often it is attached (the trace store by
    `traceFile` and by the console). A span ends at the sinks that saw it start, so a task that a sink
    saw begin also ends there when the sink is detached meanwhile. Attaching replaces the tuple, so
    readers never see it change."""

    def __init__(self) -> None:
        self._sinks: tuple[SpanProcessor, ...] = ()
        self._holds: Counter[int] = Counter()
        self._started: dict[int, tuple[SpanProcessor, ...]] = {}  # span id -> its sinks, while it runs

    def __bool__(self) -> bool:
        return bool(self._sinks)

    def add(self, sink: SpanProcessor) -> None:
        self._holds[id(sink)] += 1
        if self._holds[id(sink)] == 1:
            self._sinks = (*self._sinks, sink)

    def remove(self, sink: SpanProcessor) -> None:
        self._holds[id(sink)] -= 1
        if self._holds[id(sink)] <= 0:
            del self._holds[id(sink)]
            self._sinks = tuple(s for s in self._sinks if s is not sink)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        sinks = self._sinks
        if sinks and span.context is not None:
            self._started[span.context.span_id] = sinks
        for sink in sinks:
            sink.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for sink in self._started.pop(span.context.span_id, ()) if span.context is not None else ():
            sink.on_end(span)


class _RequestAttributes(SpanProcessor):
    """What the SDK's spans do not say: how the gateway serves (`network.transport` on its server
    spans) and who asked (`enduser.id`, on every span of a request that has a principal)."""

    def __init__(self, transport: str | None) -> None:
        self._transport = transport

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._transport is not None and span.kind is SpanKind.SERVER:
            span.set_attribute(TRANSPORT, self._transport)
        principal = current_principal()
        if principal is not None:
            span.set_attribute(ENDUSER, principal)


class _RecordEverything(Sampler):
    """Parent-based, but what it would drop is recorded all the same (not exported): the console and
    `traceFile` see every task, while a client's unsampled `traceparent` still keeps its trace out of
    the collector. (While nothing reads spans, none reaches a sampler: `unread.py`.)"""

    def __init__(self) -> None:
        self._parent_based = ParentBased(ALWAYS_ON)

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        result = self._parent_based.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        if result.decision is Decision.DROP:
            # A dropping result carries no attributes: the span's own are what it records.
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return "agentify: ParentBased(AlwaysOn), unsampled spans recorded for the console"
