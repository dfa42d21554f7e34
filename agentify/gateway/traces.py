"""Traces: one per task, with spans for input validation, planning and the backend call.

Kept in a bounded ring, published on the event bus as they change, and appended as JSON
lines to `traceFile` when one is configured; at start the ring is filled from that file's
last lines, so the console still shows them after a restart. This is the traces' sink: every string
stored is redacted here, then cut to a bounded preview (`TEXT_LIMIT`), never cut before redaction.
The file is created with mode 0600: it holds queries, arguments and file previews.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from agentify._common import files
from agentify.gateway.events import EventBus
from agentify.gateway.principal import current_principal
from agentify.security.redact import Redactor

TEXT_LIMIT = 2000
"""Characters kept of any one string of a trace (a query, a selection, an argument, a result preview)."""


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
    kind: str  # "orchestrate" | "plan" | "call" | "search"
    input: dict[str, Any]
    start: float = field(default_factory=time.time)
    end: float | None = None
    status: str = "running"  # running | ok | error | waiting
    error: dict[str, str] | None = None
    spans: list[Span] = field(default_factory=list)
    principal: str | None = None  # who asked (`gateway.principal`): a token's name, a JWT's sub

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """The inverse of `as_dict`. Raises KeyError, TypeError or AttributeError on foreign data."""
        spans = [
            Span(
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
            kind=data["kind"],
            input=data.get("input") or {},
            start=data["start"],
            end=data.get("end"),
            status=data.get("status", "ok"),
            error=data.get("error"),
            spans=spans,
            principal=data.get("principal"),
        )

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
        self._counts: Counter[str] = Counter()
        if self._file is not None:
            self._ring.extend(_load_tail(self._file, keep))

    def start(self, kind: str, task_input: dict[str, Any]) -> Trace:
        trace = Trace(
            id=uuid.uuid4().hex[:16],
            kind=kind,
            input=self._redactor.data(task_input, limit=TEXT_LIMIT),
            principal=current_principal(),
        )
        self._ring.append(trace)
        self._counts.update(("total", "running"))
        self._publish(trace)
        return trace

    def mask_literal(self, text: str) -> str:
        """The known secrets masked (no shape patterns: for backend results, before they are cut)."""
        return self._redactor.text(text, patterns=False)

    def span(self, trace: Trace, name: str) -> Span:
        span = Span(name=name, start=time.time())
        trace.spans.append(span)
        return span

    def end_span(self, trace: Trace, span: Span, error: str | None = None, **attributes: Any) -> None:
        span.end = time.time()
        span.error = self._redactor.bounded(error, TEXT_LIMIT) if error else None
        span.attributes.update(self._redactor.data(attributes, limit=TEXT_LIMIT))
        self._publish(trace)

    def finish(
        self, trace: Trace, error_code: str | None = None, error_message: str | None = None, status: str | None = None
    ) -> None:
        """`status` "waiting": the task asked the client (a 2026-07-28 round trip) and resumes in a new trace."""
        trace.end = time.time()
        trace.status = status or ("error" if error_code else "ok")
        if error_code or status:
            message = self._redactor.bounded(error_message or "", TEXT_LIMIT)
            trace.error = {"code": error_code or status or "", "message": message}
        self._counts.subtract(("running",))
        self._counts.update((trace.status,))
        self._publish(trace)
        if self._file is not None:
            try:
                _append_private(self._file, json.dumps(trace.as_dict(), default=str) + "\n")
            except OSError as exc:
                logger.warning("cannot append the trace to {}: {}", self._file, exc.strerror)

    def counts(self) -> dict[str, int]:
        """Tasks since this start (traces loaded from `traceFile` not included): total, running, ok, error."""
        return {key: self._counts[key] for key in ("total", "running", "ok", "error")}

    def recent(self, limit: int = 100) -> list[Trace]:
        return list(self._ring)[-limit:][::-1]

    def get(self, trace_id: str) -> Trace | None:
        return next((t for t in self._ring if t.id == trace_id), None)

    def _publish(self, trace: Trace) -> None:
        # Live updates matter only to a connected console; the ring above keeps every trace anyway.
        if self._bus.has_subscribers:
            self._bus.publish("trace", trace.as_dict())


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
