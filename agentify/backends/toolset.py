"""One backend's tools: from its manifest until a session lists them, filtered by `tools.allow`/`deny`,
versioned (a catalog rebuilds only when a version changed), and handed out as handles bound to the
backend's caller, so a plan carries what it calls."""

from __future__ import annotations

import itertools

import anyio
import mcp_types as types

from agentify.backends.handles import ToolCaller, ToolHandle
from agentify.backends.manifest import ManifestStore
from agentify.backends.overrides import Offered, offered
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

    def relisting(self) -> None:
        """About to list again: a notification from now on asks for another listing."""
        self.stale = anyio.Event()

    @property
    def tools(self) -> list[types.Tool]:
        """The offered tools as the gateway shows them (`tools.overrides` applied)."""
        return [o.tool for o in self._offered]

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
