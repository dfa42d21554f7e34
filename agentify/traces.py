"""Traces: one per task, with spans for input validation, planning and the backend call.

Kept in a bounded ring, published on the event bus as they change, and appended as JSON
lines to `traceFile` when one is configured. Everything stored is redacted first.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from agentify.events import EventBus
from agentify.redact import Redactor


@dataclass
class Span:
    name: str  # "validate" | "plan" | "call"
    start: float
    end: float | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def duration_ms(self) -> float | None:
        return None if self.end is None else round((self.end - self.start) * 1000, 2)


@dataclass
class Trace:
    id: str
    kind: str  # "orchestrate" | "plan"
    input: dict[str, Any]
    start: float = field(default_factory=time.time)
    end: float | None = None
    status: str = "running"  # running | ok | error
    error: dict[str, str] | None = None
    spans: list[Span] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["durationMs"] = None if self.end is None else round((self.end - self.start) * 1000, 2)
        for span, raw in zip(self.spans, data["spans"], strict=True):
            raw["durationMs"] = span.duration_ms
        return data


class TraceStore:
    def __init__(self, bus: EventBus, redactor: Redactor, keep: int = 500, file: str | None = None) -> None:
        self._bus = bus
        self._redactor = redactor
        self._ring: deque[Trace] = deque(maxlen=keep)
        self._file = Path(file) if file else None

    def start(self, kind: str, task_input: dict[str, Any]) -> Trace:
        trace = Trace(id=uuid.uuid4().hex[:16], kind=kind, input=self._redactor.data(task_input))
        self._ring.append(trace)
        self._publish(trace)
        return trace

    def span(self, trace: Trace, name: str) -> Span:
        span = Span(name=name, start=time.time())
        trace.spans.append(span)
        return span

    def end_span(self, trace: Trace, span: Span, error: str | None = None, **attributes: Any) -> None:
        span.end = time.time()
        span.error = self._redactor.text(error) if error else None
        span.attributes.update(self._redactor.data(attributes))
        self._publish(trace)

    def finish(self, trace: Trace, error_code: str | None = None, error_message: str | None = None) -> None:
        trace.end = time.time()
        trace.status = "error" if error_code else "ok"
        if error_code:
            trace.error = {"code": error_code, "message": self._redactor.text(error_message or "")}
        self._publish(trace)
        if self._file is not None:
            try:
                with self._file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(trace.as_dict(), default=str) + "\n")
            except OSError as exc:
                logger.warning("cannot append the trace to {}: {}", self._file, exc.strerror)

    def recent(self, limit: int = 100) -> list[Trace]:
        return list(self._ring)[-limit:][::-1]

    def get(self, trace_id: str) -> Trace | None:
        return next((t for t in self._ring if t.id == trace_id), None)

    def _publish(self, trace: Trace) -> None:
        self._bus.publish("trace", trace.as_dict())
