"""Backend tools shown directly (config `expose` with "tools", or those the operator names in `listedTools`): the name
each is listed under in the gateway's own `tools/list`, and which tool a `tools/call` by name means; and
the description of `search_tools`, derived from what is behind it.

Tools named in `listedTools` are listed beside `search_tools` and `call_tool` under their catalog name, whatever
`prefix` says, since that is the name search_tools gives them.

With `prefix` (the default) a tool is listed under its catalog name, `<backend>__<tool>`, which is
unique by construction. Without it a tool keeps its own name (as `tools.overrides` shows it) unless
another backend's tool or one of the gateway's own tools has that name: then every tool of that name
is listed as `<backend>__<tool>`, so no listing depends on which backend started first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
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

    @classmethod
    def chosen(cls, catalog: Catalog, names: Collection[str]) -> DirectTools:
        """The tools named in config `listedTools` that the catalog has, in the config's order; unknown names are
        left out (`missing` says which)."""
        return cls({name: tool for name in names if (tool := catalog.get(name)) is not None})

    def find(self, name: str) -> CatalogTool | None:
        """The tool a `tools/call` names: by its listed name, else by the backend's own name for it when
        exactly one backend has a tool of that name (an MCP App calls its tools as its server named them)."""
        if (tool := self.listed.get(name)) is not None:
            return tool
        owners = [t for t in self.listed.values() if t.handle is not None and t.handle.origin == name]
        return owners[0] if len(owners) == 1 else None


SEARCH_INTRO = (
    "Find the tools of the configured MCP servers that fit what you want to do: describe the task in plain "
    "words (several tasks at once are fine). Returns the best matches with their names, descriptions and input "
    "schemas; run one with call_tool."
)
MAX_BACKENDS = 8
MAX_NAMES = 4
MAX_DESCRIPTION = 90


def search_description(backends: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """search_tools' description: what it does, then what is behind it, one line per backend (id, what it
    does, how many tools and a few of their names), at most `MAX_BACKENDS` of them. `backends`: (id,
    description, tool names) of each enabled backend, as the config and the last tool lists know them."""
    lines = [SEARCH_INTRO]
    shown = [b for b in backends if b[2] or b[1]]
    if shown:
        lines.append("Behind it:")
    for bid, description, names in shown[:MAX_BACKENDS]:
        what = " ".join(description.split())
        what = what if len(what) <= MAX_DESCRIPTION else what[: MAX_DESCRIPTION - 3] + "..."
        some = ", ".join(names[:MAX_NAMES]) + (", ..." if len(names) > MAX_NAMES else "")
        tools = f"{len(names)} tools: {some}" if names else "tools not listed yet"
        lines.append(f"- {bid}" + (f": {what}" if what else "") + f" ({tools})")
    if len(shown) > MAX_BACKENDS:
        rest = shown[MAX_BACKENDS:]
        lines.append(f"- and {len(rest)} more backends ({sum(len(b[2]) for b in rest)} tools)")
    return "\n".join(lines)
