"""The operation-duration metrics of the MCP semantic conventions, measured from the spans themselves.

`mcp.server.operation.duration`: every MCP request the gateway served (the SDK's server spans).
`mcp.client.operation.duration`: every backend tool call (agentify's client spans; the SDK's own
per-message client span under each is not counted again). Histograms in seconds, with the bucket
boundaries the conventions recommend; attributes are the low-cardinality ones they list.
"""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.metrics import Meter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind

from agentify.telemetry.names import (
    ERROR_TYPE,
    MCP_METHOD,
    MCP_PROTOCOL_VERSION,
    OPERATION,
    RPC_STATUS,
    SCOPE,
    SERVER_ADDRESS,
    SERVER_PORT,
    TOOL_NAME,
    TRANSPORT,
)

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
KEYS = (
    MCP_METHOD,
    TOOL_NAME,
    OPERATION,
    ERROR_TYPE,
    RPC_STATUS,
    TRANSPORT,
    MCP_PROTOCOL_VERSION,
    SERVER_ADDRESS,
    SERVER_PORT,
)


class OperationDurations(SpanProcessor):
    def __init__(self, meter: Meter) -> None:
        self._server = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the receiver until the result is sent.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        self._client = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="MCP request duration as observed on the sender until the response is received.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: a duration is known when the span ends."""

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if MCP_METHOD not in attributes or span.start_time is None or span.end_time is None:
            return
        if span.kind is SpanKind.SERVER:
            histogram = self._server
        elif span.kind is SpanKind.CLIENT and span.instrumentation_scope and span.instrumentation_scope.name == SCOPE:
            histogram = self._client
        else:
            return
        recorded = {key: attributes[key] for key in KEYS if key in attributes}
        histogram.record((span.end_time - span.start_time) / 1e9, recorded)
