"""What the console serves, built from the gateway's live state and redacted in one place.

Log records and traces were redacted when they were made; they are redacted again here,
because secrets can be learnt later (an API key from `initializationOptions`).

A task result is redacted here once, whole, and only then cut to `RESULT_CHARS`: a cut made
first could split a secret so that the redactor no longer recognises the half that is shown.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from agentify import __version__
from agentify.console.governance import audit_of, pins_of
from agentify.gateway.policy import confirmation_reason
from agentify.gateway.services import TaskServices
from agentify.planner.catalog import Catalog
from agentify.security.credentials import mask_url
from agentify.security.redact import MASK

if TYPE_CHECKING:
    from agentify._common.logging import LogSetup
    from agentify.backends import BackendManager
    from agentify.gateway.events import EventBus
    from agentify.gateway.traces import TraceStore
    from agentify.security.redact import Redactor


class ConsoleServices(TaskServices, Protocol):
    """What the console uses of the gateway's services (`gateway.services.Services`)."""

    @property
    def redactor(self) -> Redactor: ...

    @property
    def logs(self) -> LogSetup: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def traces(self) -> TraceStore: ...

    @property
    def started(self) -> float: ...

    @property
    def backends(self) -> BackendManager: ...

    def reading_traces(self) -> AbstractContextManager[None]: ...


_T = TypeVar("_T")
RESULT_CHARS = 100_000  # what POST /api/tasks sends back at most; the page shows it in one <pre>
LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class Views:
    def __init__(self, services: ConsoleServices, console_url: str) -> None:
        self._services = services
        self._console_url = console_url

    def redact(self, data: _T) -> _T:
        return cast(_T, self._services.redactor.data(data))

    def status(self) -> dict[str, Any]:
        services = self._services
        status = services.status()
        states: dict[str, int] = {}
        for backend in status.backends:
            states[backend.state.value] = states.get(backend.state.value, 0) + 1
        config_file = services.settings.file_path
        return self.redact(
            {
                "version": __version__,
                "pid": os.getpid(),
                "cwd": os.getcwd(),
                "configFile": str(config_file) if config_file else None,
                "startedAt": services.started,
                "uptimeSeconds": round(time.time() - services.started, 1),
                "planner": {"name": status.planner.name, "reason": status.planner.reason},
                "tasks": services.traces.counts(),
                "backends": states,
                "console": {"url": self._console_url},
            }
        )

    def backends(self) -> list[dict[str, Any]]:
        return self.redact([status.as_dict() for status in self._services.status().backends])

    def tools(self, backend: str | None = None) -> list[dict[str, Any]]:
        """Every tool the planner's catalog holds now (of one backend, or all), without waiting for backends
        that are still starting: the MCP form of the tool (`tools.overrides` applied), the name `call_tool`
        takes (`name`), and why a call must be confirmed (`confirm`, None when it need not)."""
        handles = [handle for supervisor in self._services.backends.enabled() for handle in supervisor.handles()]
        shown = []
        for entry in Catalog.from_handles(handles).tools.values():
            if backend is not None and entry.backend != backend:
                continue
            handle = entry.handle
            reason = confirmation_reason(handle.spec, handle.origin, handle.listed()) if handle else None
            tool = entry.tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            shown.append(
                tool | {"name": entry.name, "backend": entry.backend, "tool": entry.tool.name, "confirm": reason}
            )
        return self.redact(shown)

    def pins(self) -> dict[str, Any]:
        """The tools `pinning` withholds or flags, or that it is not enabled."""
        pins = pins_of(self._services)
        if pins is None:
            return {"enabled": False, "tools": []}
        return {"enabled": True, "tools": self.redact(pins.changed_tools())}

    def audit(self, limit: int = 100) -> dict[str, Any]:
        """The newest audit records (newest first), or that the audit log is not enabled."""
        audit = audit_of(self._services)
        if audit is None:
            return {"enabled": False, "records": []}
        return {"enabled": True, "records": self.redact(audit.recent(limit))}

    def config(self) -> dict[str, Any]:
        """The effective config (every source merged), with the API key and every env value masked."""
        data = self._services.settings.current.model_dump(mode="json", by_alias=True)
        if data["planner"].get("apiKey"):
            data["planner"]["apiKey"] = MASK
        for backend in data["backends"]:
            backend["env"] = dict.fromkeys(backend["env"], MASK)
            backend["headers"] = dict.fromkeys(backend["headers"], MASK)
            if backend.get("auth"):
                shown = ("type", "clientId", "scopes")
                backend["auth"] = {k: (v if k in shown else MASK) for k, v in backend["auth"].items()}
            if backend.get("url"):
                backend["url"] = mask_url(backend["url"])
        return self.redact(data)

    def logs(self, level: str = "TRACE", limit: int = 200, trace_id: str | None = None) -> list[dict[str, Any]]:
        """The newest `limit` records at `level` or above, oldest first."""
        floor = LEVELS[level]
        records = [
            event.data
            for event in self._services.bus.recent["log"]
            if LEVELS.get(event.data.get("level", ""), 0) >= floor
            and (trace_id is None or event.data.get("extra", {}).get("trace") == trace_id)
        ]
        return self.redact(records[-limit:])

    def traces(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest `limit` traces, newest first."""
        return self.redact([trace.as_dict() for trace in self._services.traces.recent(limit)])

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """A task by its id, or the newest task of an OpenTelemetry trace; with the log lines of its trace."""
        trace = self._services.traces.get(trace_id)
        if trace is None:
            return None
        return self.redact(trace.as_dict()) | {"logs": self.logs(trace_id=trace.trace_id or trace.id, limit=500)}

    def task_result(self, result: dict[str, Any]) -> dict[str, Any]:
        """An MCP result (wire form) as the console sends it: redacted, then cut to `RESULT_CHARS`."""
        return bounded_result(self.redact(result), RESULT_CHARS)


def bounded_result(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """The result with at most `limit` characters of content: text beyond it is cut and other
    blocks past it are left out, each with a note saying how much; `structuredContent` is kept
    only when it fits in what is left."""
    remaining = limit
    content: list[dict[str, Any]] = []
    for block in result.get("content") or []:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text: str = block["text"]
            if len(text) > remaining:
                note = f"\n[agentify console: {len(text) - remaining} of {len(text)} characters not shown]"
                block = block | {"text": text[:remaining] + note}
            remaining -= min(len(text), remaining)
            content.append(block)
            continue
        size = len(json.dumps(block, default=str))
        if size > remaining:
            note = f"[agentify console: {block.get('type', 'a')} content of {size} characters not shown]"
            content.append({"type": "text", "text": note})
        else:
            remaining -= size
            content.append(block)
    bounded = result | {"content": content}
    structured = result.get("structuredContent")
    if structured is not None and len(json.dumps(structured, default=str)) > remaining:
        del bounded["structuredContent"]
        content.append({"type": "text", "text": "[agentify console: structuredContent too large to show]"})
    return bounded
