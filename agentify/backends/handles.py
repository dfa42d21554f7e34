"""Resolved tool handles: what `BackendManager.catalog()` returns and a `Plan` carries.

A handle is one tool of one backend, bound to the supervisor that calls it, so no later step
looks the (backend, tool) pair up again or reaches into the manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.logs import LogSink
from agentify.backends.overrides import merged
from agentify.backends.questions import Answerer
from agentify.config import BackendConfig


class ToolCaller(Protocol):
    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult: ...

    def listed_tool(self, tool: str) -> types.Tool | None: ...

    async def live_tool(self, tool: str) -> types.Tool | None: ...


@dataclass(frozen=True, eq=False)
class ToolHandle:
    """One callable backend tool. `spec` is the backend's config (the safety policy reads it); `tool` is the
    form the gateway shows (`tools.overrides` applied), `origin` the backend's own name for it."""

    backend: str
    description: str
    tool: types.Tool
    spec: BackendConfig
    caller: ToolCaller
    origin: str
    pinned: Mapping[str, Any] = field(default_factory=dict)
    """Arguments fixed by `tools.overrides`: sent with every call, never shown."""

    async def call(
        self,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult:
        """Calls the tool; a lazy or stopped backend is started first. `answerer` answers the backend's questions,
        `logs` hears its log messages.

        Raises:
            BackendUnavailable, BackendError, TaskTimeout, Denied; what the answerer raises.
        """
        return await self.caller.call(self.origin, merged(arguments, self.pinned), progress, answerer, logs)

    def listed(self) -> types.Tool | None:
        """This tool as the backend itself listed it in this run, or None when it has not (its tools come from
        the cached manifest, a file that may have been edited) or no longer offers it."""
        return self.caller.listed_tool(self.origin)

    async def live(self) -> types.Tool | None:
        """As `listed`, but a backend that has not listed its tools in this run is started first (as the call
        would be).

        Raises:
            BackendUnavailable: it cannot be started.
        """
        return await self.caller.live_tool(self.origin)


@dataclass(frozen=True)
class ToolCatalog:
    """Every usable tool; `key` changes whenever any backend's tools (or description) change."""

    key: tuple[tuple[str, str, int, int], ...]
    handles: tuple[ToolHandle, ...]
    missing: tuple[tuple[str, str, str], ...] = ()
    """(id, description, why) of each enabled backend that offers no tools now."""

    def find(self, backend: str, tool: str) -> ToolHandle | None:
        """The handle of one tool by its backend id and tool name (for callers that did not plan)."""
        return next((h for h in self.handles if h.backend == backend and h.tool.name == tool), None)
