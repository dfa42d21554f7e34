"""Backend tools shown directly (config `expose` with "tools"): the name each is listed under in the
gateway's own `tools/list`, and which tool a `tools/call` by name means.

With `prefix` (the default) a tool is listed under its catalog name, `<backend>__<tool>`, which is
unique by construction. Without it a tool keeps its own name (as `tools.overrides` shows it) unless
another backend's tool or one of the gateway's own tools has that name: then every tool of that name
is listed as `<backend>__<tool>`, so no listing depends on which backend started first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from agentify.planner.catalog import Catalog, CatalogTool


@dataclass(frozen=True)
class DirectTools:
    listed: dict[str, CatalogTool]
    """Every offered tool by the name the gateway lists it under."""
    clashes: tuple[str, ...] = ()
    """Own names that more than one tool has (listed prefixed instead), for a warning."""

    @classmethod
    def of(cls, catalog: Catalog, *, prefix: bool, reserved: Collection[str]) -> DirectTools:
        """`reserved`: the gateway's own tool names, which a backend tool never takes."""
        if prefix:
            return cls(dict(catalog.tools))
        counts = Counter(t.tool.name for t in catalog.tools.values())
        taken = set(reserved) | set(catalog.tools)
        listed: dict[str, CatalogTool] = {}
        clashes: set[str] = set()
        for name, tool in catalog.tools.items():
            own = tool.tool.name
            if counts[own] > 1 or (own in taken and own != name):
                clashes.add(own)
                listed[name] = tool
            else:
                listed[own] = tool
        return cls(listed, tuple(sorted(clashes)))

    def find(self, name: str) -> CatalogTool | None:
        """The tool a `tools/call` names: by its listed name, else by the backend's own name for it when
        exactly one backend has a tool of that name (an MCP App calls its tools as its server named them)."""
        if (tool := self.listed.get(name)) is not None:
            return tool
        owners = [t for t in self.listed.values() if t.handle is not None and t.handle.origin == name]
        return owners[0] if len(owners) == 1 else None
