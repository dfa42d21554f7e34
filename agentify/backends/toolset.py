"""One backend's tools: from its manifest until a session lists them, filtered by `tools.allow`/`deny`,
versioned (a catalog rebuilds only when a version changed), and handed out as handles bound to the
backend's caller, so a plan carries what it calls."""

from __future__ import annotations

import itertools

import anyio
import mcp_types as types
from loguru import logger
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from agentify.backends.handles import ToolCaller, ToolHandle
from agentify.backends.manifest import ManifestStore
from agentify.backends.overrides import Offered, offered
from agentify.backends.session import list_tools
from agentify.config import BackendConfig

_VERSIONS = itertools.count(1)  # global, so a replaced backend never reuses a version


class ToolSet:
    def __init__(self, spec: BackendConfig, manifests: ManifestStore, caller: ToolCaller) -> None:
        self._spec = spec
        self._manifests = manifests
        self._caller = caller
        known = manifests.load(spec)
        self.from_manifest = known is not None
        self._offered = self._permitted(known or [])
        self.version = next(_VERSIONS)
        self.listed = False
        """Whether a session of this run listed them (a backend that never did cannot be planned for)."""
        self.stale = anyio.Event()
        """Set when the backend said its tools changed (`notifications/tools/list_changed`)."""
        self._handles: tuple[int, tuple[ToolHandle, ...]] = (0, ())

    def replace(self, tools: list[types.Tool]) -> None:
        """What a session listed: kept in the manifest, then filtered."""
        self._manifests.save(self._spec, tools)
        self._offered = self._permitted(tools)
        self.version = next(_VERSIONS)
        self.listed = True

    async def list_again(self, session: ClientSession, limit: float) -> bool:
        """Lists them on a live session (the owner's), after the backend said they changed; True when it answered
        within `limit` seconds. A notification from now on asks for another listing."""
        self.stale = anyio.Event()
        log = logger.bind(backend=self._spec.id)
        try:
            with anyio.fail_after(limit):
                self.replace(await list_tools(session))
        except (TimeoutError, MCPError) as exc:
            log.warning("listing tools again failed: {}", exc)
            return False
        log.info("tools changed: now {} tools", len(self.tools))
        return True

    @property
    def tools(self) -> list[types.Tool]:
        """The offered tools as the gateway shows them (`tools.overrides` applied)."""
        return [o.tool for o in self._offered]

    def by_origin(self, origin: str) -> types.Tool | None:
        """The tool the backend itself calls `origin`, as the gateway shows it (annotations are the backend's)."""
        return next((o.tool for o in self._offered if o.origin == origin), None)

    def handles(self) -> tuple[ToolHandle, ...]:
        version, handles = self._handles
        if version != self.version:
            spec = self._spec
            handles = tuple(
                ToolHandle(spec.id, spec.description, o.tool, spec, self._caller, o.origin, o.pinned)
                for o in self._offered
            )
            self._handles = (self.version, handles)
        return handles

    def _permitted(self, tools: list[types.Tool]) -> list[Offered]:
        return offered(self._spec, [t for t in tools if self._spec.tools.permits(t.name)])
