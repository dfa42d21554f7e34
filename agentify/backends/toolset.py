"""One backend's tools: from its manifest until a session lists them, filtered by `tools.allow`/`deny`,
judged by the pins (config `pinning`: what `enforce` withholds is left out), versioned (a catalog
rebuilds only when a version or the pins changed), and handed out as handles bound to the backend's
caller, so a plan carries what it calls."""

from __future__ import annotations

import itertools

import anyio
import mcp_types as types
from loguru import logger
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from agentify.backends.handles import ToolCaller, ToolHandle
from agentify.backends.manifest import ManifestStore
from agentify.backends.overrides import offered
from agentify.backends.session import list_tools
from agentify.config import BackendConfig
from agentify.pinning import Held, PinBook

_VERSIONS = itertools.count(1)  # global, so a replaced backend never reuses a version


class ToolSet:
    def __init__(
        self, spec: BackendConfig, manifests: ManifestStore, caller: ToolCaller, pins: PinBook | None = None
    ) -> None:
        self._spec = spec
        self._manifests = manifests
        self._caller = caller
        self._pins = pins
        known = manifests.load(spec)
        self.from_manifest = known is not None
        self._raw = self._allowed(known or [])
        self._offered = offered(spec, self._raw)
        self.version = next(_VERSIONS)
        self.listed = False
        """Whether a session of this run listed them (a backend that never did cannot be planned for)."""
        self.stale = anyio.Event()
        """Set when the backend said its tools changed (`notifications/tools/list_changed`)."""
        self._handles: tuple[tuple[int, int], tuple[ToolHandle, ...]] = ((0, 0), ())
        self._judged: tuple[tuple[int, int], dict[str, Held]] = ((0, 0), {})
        self.owner = True
        """False for an extra session's tools (`pool.py`): judged by the pins, never the backend's listing there."""

    def replace(self, tools: list[types.Tool]) -> None:
        """What a session listed: kept in the manifest, filtered, then shown to the pins."""
        self._manifests.save(self._spec, tools)
        self._raw = self._allowed(tools)
        self._offered = offered(self._spec, self._raw)
        self.version = next(_VERSIONS)
        self.listed = True
        if self._pins is not None and self.owner:
            self._pins.observe(self._spec.id, self._raw)
        elif self._pins is not None:
            self._pins.observe_extra(self._spec.id, self._raw)

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
    def pins_generation(self) -> int:
        return self._pins.generation if self._pins is not None else 0

    @property
    def tools(self) -> list[types.Tool]:
        """The offered tools as the gateway shows them (`tools.overrides` applied), without the withheld ones."""
        withheld = self.withheld()
        return [o.tool for o in self._offered if o.origin not in withheld]

    def held(self) -> dict[str, Held]:
        """The tools that wait for a person's approval (by the backend's own name), whatever the mode."""
        if self._pins is None:
            return {}
        key = (self.version, self._pins.generation)
        if self._judged[0] != key:
            self._judged = (key, self._pins.judge(self._spec.id, self._raw))
        return self._judged[1]

    def withheld(self) -> dict[str, Held]:
        """What `pinning: enforce` keeps from every list and call."""
        return self.held() if self._pins is not None and self._pins.mode == "enforce" else {}

    def shown_name(self, origin: str) -> str:
        """The name the gateway shows for the backend's tool `origin` (`tools.overrides` may rename it)."""
        return next((o.tool.name for o in self._offered if o.origin == origin), origin)

    def by_origin(self, origin: str) -> types.Tool | None:
        """The tool the backend itself calls `origin`, as the gateway shows it (annotations are the backend's)."""
        return next((o.tool for o in self._offered if o.origin == origin), None)

    def handles(self) -> tuple[ToolHandle, ...]:
        key, handles = self._handles
        if key != (self.version, self.pins_generation):
            spec = self._spec
            withheld = self.withheld()
            handles = tuple(
                ToolHandle(spec.id, spec.description, o.tool, spec, self._caller, o.origin, o.pinned)
                for o in self._offered
                if o.origin not in withheld
            )
            self._handles = ((self.version, self.pins_generation), handles)
        return handles

    def _allowed(self, tools: list[types.Tool]) -> list[types.Tool]:
        return [t for t in tools if self._spec.tools.permits(t.name)]
