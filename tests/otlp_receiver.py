"""An OTLP/HTTP receiver on 127.0.0.1, for tests and the benchmark: a real HTTP server that decodes
the protobuf export requests (`/v1/traces`, `/v1/metrics`, `/v1/logs`) with the OpenTelemetry proto package, as
a collector does, and keeps what it received as plain data."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

SERVER, CLIENT = 2, 3  # the proto's Span.SpanKind values


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    scope: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    status_message: str


@dataclass(frozen=True)
class ReceivedLog:
    body: Any
    event_name: str
    scope: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


@dataclass
class OtlpReceiver:
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Each metric's data points, as the proto's JSON mapping has them."""
    logs: list[ReceivedLog] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    """Every request decoded to text: what a search for a leaked secret reads."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def snapshot(self) -> tuple[list[ReceivedSpan], dict[str, list[dict[str, Any]]]]:
        with self._lock:
            return list(self.spans), {name: list(points) for name, points in self.metrics.items()}

    def _traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            scope=scope_spans.scope.name,
                            attributes=_attributes(span.attributes),
                            resource=resource,
                            status_code=span.status.code,
                            status_message=span.status.message,
                        )
                    )
        with self._lock:
            self.spans.extend(spans)
            self.raw.append(str(request))

    def received_logs(self) -> list[ReceivedLog]:
        with self._lock:
            return list(self.logs)

    def _logs(self, body: bytes) -> None:
        request = ExportLogsServiceRequest.FromString(body)
        received = []
        for resource_logs in request.resource_logs:
            resource = _attributes(resource_logs.resource.attributes)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    received.append(
                        ReceivedLog(
                            body=_value(record.body),
                            event_name=record.event_name,
                            scope=scope_logs.scope.name,
                            attributes=_attributes(record.attributes),
                            resource=resource,
                        )
                    )
        with self._lock:
            self.logs.extend(received)
            self.raw.append(str(request))

    def _metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self._lock:
            self.raw.append(str(request))
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        points = MessageToDict(metric).get("histogram", {}).get("dataPoints", [])
                        self.metrics.setdefault(metric.name, []).extend(points)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._traces(body)
                elif self.path == "/v1/metrics":
                    receiver._metrics(body)
                elif self.path == "/v1/logs":
                    receiver._logs(body)
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None
