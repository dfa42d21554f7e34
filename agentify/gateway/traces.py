"""The console's and `traceFile`'s view of the tasks: a span processor over agentify's own spans.

A task's root span (it carries `agentify.task.kind`) opens a `Trace`; each span directly under it
(validate, plan, confirm, the backend call) is added as a `Step` when it ends; the root's end
finishes the trace. Everything else (the SDK's spans, spans nested deeper) is not shown here.
Traces are kept in a bounded ring, published on the event bus as they change, and appended as JSON
lines to `traceFile` when one is configured; at start the ring is filled from that file's last
lines, so the console still shows them after a restart. This is the traces' sink: every string
stored is redacted here, then cut to a bounded preview (`TEXT_LIMIT`), never cut before redaction.
Content attributes (`names.CONTENT`: the task's input, arguments, the result's text) are kept here.
The file is created with mode 0600: it holds queries, arguments and file previews.
"""

from __future__ import annotations

import json
import os
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from agentify._common import files
from agentify.gateway.events import EventBus
from agentify.security.redact import Redactor
from agentify.telemetry.names import (
    ENDUSER,
    ERROR_TYPE,
    SCOPE,
    TASK_INPUT,
    TASK_KIND,
    TOOL_ARGUMENTS,
    TOOL_ERROR,
    TOOL_RESULT,
    WAITING,
)

TEXT_LIMIT = 2000
"""Characters kept of any one string of a trace (a query, a selection, an argument, a result preview)."""
_JSON = frozenset({TASK_INPUT, TOOL_ARGUMENTS})
"""Attributes that hold JSON on the span (OpenTelemetry attributes are flat): shown here as data."""


@dataclass
class Step:
    name: str  # the span's name: "validate", "plan", "confirm", "tools/call <tool>", "search"
    start: float
    end: float | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def duration_ms(self) -> float | None:
        return None if self.end is None else round((self.end - self.start) * 1000, 2)


@dataclass
class Trace:
    id: str  # the task's root span id: unique per task, also when a client continues one trace over many
    trace_id: str | None  # the OpenTelemetry trace id (what `_meta` calls traceId)
    kind: str  # "orchestrate" | "plan" | "call" | "search"
    input: dict[str, Any]
    start: float
    end: float | None = None
    status: str = "running"  # running | ok | error | waiting
    error: dict[str, str] | None = None
    spans: list[Step] = field(default_factory=list)
    principal: str | None = None  # who asked: the request's `enduser.id` (telemetry.principal)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """The inverse of `as_dict`. Raises KeyError, TypeError or AttributeError on foreign data."""
        steps = [
            Step(
                name=s["name"],
                start=s["start"],
                end=s.get("end"),
                attributes=s.get("attributes") or {},
                error=s.get("error"),
            )
            for s in data.get("spans") or []
        ]
        return cls(
            id=data["id"],
            trace_id=data.get("traceId"),
            kind=data["kind"],
            input=data.get("input") or {},
            start=data["start"],
            end=data.get("end"),
            status=data.get("status", "ok"),
            error=data.get("error"),
            spans=steps,
            principal=data.get("principal"),
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["traceId"] = data.pop("trace_id")
        data["durationMs"] = None if self.end is None else round((self.end - self.start) * 1000, 2)
        for step, raw in zip(self.spans, data["spans"], strict=True):
            raw["durationMs"] = step.duration_ms
        return data


class TraceStore(SpanProcessor):
    def __init__(self, bus: EventBus, redactor: Redactor, keep: int = 500, file: str | None = None) -> None:
        self._bus = bus
        self._redactor = redactor
        self._ring: deque[Trace] = deque(maxlen=keep)
        self._open: dict[int, Trace] = {}
        self._file = Path(file) if file else None
        self._counts: Counter[str] = Counter()
        if self._file is not None:
            self._ring.extend(_load_tail(self._file, keep))

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        if not _ours(span) or TASK_KIND not in attributes or span.context is None:
            return
        trace = Trace(
            id=format(span.context.span_id, "016x"),
            trace_id=format(span.context.trace_id, "032x"),
            kind=str(attributes[TASK_KIND]),
            input=self._redactor.data(_parsed(attributes.get(TASK_INPUT)) or {}, limit=TEXT_LIMIT),
            start=_seconds(span.start_time),
            principal=_principal(attributes.get(ENDUSER)),
        )
        self._open[span.context.span_id] = trace
        self._ring.append(trace)
        self._counts.update(("total", "running"))
        self._publish(trace)

    def on_end(self, span: ReadableSpan) -> None:
        if not _ours(span) or span.context is None:
            return
        trace = self._open.pop(span.context.span_id, None)
        if trace is not None:
            self._finish(trace, span)
            return
        parent = self._open.get(span.parent.span_id) if span.parent is not None else None
        if parent is None:
            return
        attributes = {k: _parsed(v) if k in _JSON else v for k, v in (span.attributes or {}).items() if k != TASK_KIND}
        parent.spans.append(
            Step(
                name=span.name,
                start=_seconds(span.start_time),
                end=_seconds(span.end_time),
                attributes=self._redactor.data(attributes, limit=TEXT_LIMIT),
                error=self._error_text(span),
            )
        )
        self._publish(parent)

    def counts(self) -> dict[str, int]:
        """Tasks since this start (traces loaded from `traceFile` not included): total, running, ok, error."""
        return {key: self._counts[key] for key in ("total", "running", "ok", "error")}

    def recent(self, limit: int = 100) -> list[Trace]:
        return list(self._ring)[-limit:][::-1]

    def get(self, trace_id: str) -> Trace | None:
        """A task by its own id, or the newest task of an OpenTelemetry trace."""
        return next((t for t in reversed(self._ring) if trace_id in (t.id, t.trace_id)), None)

    def _finish(self, trace: Trace, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        trace.end = _seconds(span.end_time)
        if WAITING in attributes:  # a 2026-07-28 round trip: the task resumes in a new trace
            trace.status = "waiting"
            asked = f"waiting for the client: {attributes[WAITING]!s}"
            trace.error = {"code": "waiting", "message": self._redactor.bounded(asked, TEXT_LIMIT)}
        elif ERROR_TYPE in attributes:
            trace.status = "error"
            trace.error = {"code": str(attributes[ERROR_TYPE]), "message": self._error_text(span) or ""}
        elif (tool_error := _tool_error(trace)) is not None:
            # The task ran, but the backend's result says the tool failed (`isError`): no success to show.
            trace.status = "error"
            trace.error = tool_error
        else:
            trace.status = "ok"
        self._counts.subtract(("running",))
        self._counts.update((trace.status,))
        self._publish(trace)
        if self._file is not None:
            try:
                _append_private(self._file, json.dumps(trace.as_dict(), default=str) + "\n")
            except OSError as exc:
                logger.warning("cannot append the trace to {}: {}", self._file, exc.strerror)

    def _error_text(self, span: ReadableSpan) -> str | None:
        if span.status.status_code is not StatusCode.ERROR:
            return None
        text = span.status.description or str((span.attributes or {}).get(ERROR_TYPE, "error"))
        return self._redactor.bounded(text, TEXT_LIMIT)

    def _publish(self, trace: Trace) -> None:
        # Live updates matter only to a connected console; the ring above keeps every trace anyway.
        if self._bus.has_subscribers:
            self._bus.publish("trace", trace.as_dict())


def _tool_error(trace: Trace) -> dict[str, str] | None:
    """The failure of the backend call whose result was an error (`isError: true`), if it was."""
    for step in trace.spans:
        if step.attributes.get(ERROR_TYPE) == TOOL_ERROR:
            result = step.attributes.get(TOOL_RESULT)
            said = f": {result}" if isinstance(result, str) and result else ""
            return {"code": TOOL_ERROR, "message": f"{step.name} returned an error{said}"[:TEXT_LIMIT]}
    return None


def _ours(span: ReadableSpan) -> bool:
    return span.instrumentation_scope is not None and span.instrumentation_scope.name == SCOPE


def _seconds(nanoseconds: int | None) -> float:
    return (nanoseconds or 0) / 1e9


def _parsed(value: Any) -> Any:
    """A content attribute as the task had it (JSON on the span), or the value itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _append_private(path: Path, line: str) -> None:
    """Appends to `path`, creating it readable by its owner only (and tightening a file made before)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | files.CLOEXEC, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _load_tail(path: Path, keep: int) -> list[Trace]:
    """The last `keep` traces of earlier runs; torn or foreign lines are skipped."""
    try:
        with path.open(encoding="utf-8") as handle:
            lines = deque(handle, maxlen=keep)
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("cannot read earlier traces from {}: {}", path, exc)
        return []
    traces = []
    for line in lines:
        try:
            traces.append(Trace.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return traces


def _principal(value: object) -> str | None:
    return value if isinstance(value, str) else None
