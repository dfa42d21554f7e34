"""Tool overrides (`tools.overrides` of a backend): the form in which the gateway shows a backend's tool.

The planner, `search_tools`, exposed tools and `list_backends` see the shown form (name, description,
input schema without the fixed arguments); a call goes to the backend's own name with the fixed
arguments merged in. Overrides are applied to what the backend lists and to its manifest alike, which
keeps the backend's own form, so changing an override needs no new listing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from loguru import logger

from agentify.config import BackendConfig


@dataclass(frozen=True)
class Offered:
    """One backend tool as the gateway shows it, and what a call to it sends."""

    tool: types.Tool
    origin: str
    """The backend's own name for the tool: what `tools/call` sends, and what allow, deny and confirm name."""
    pinned: Mapping[str, Any] = field(default_factory=dict)
    """Arguments fixed by the config: nobody sees or changes them; every call sends them."""


def offered(spec: BackendConfig, tools: list[types.Tool]) -> list[Offered]:
    """`tools` (already filtered by allow and deny) in the form the config's overrides give them.

    A rename onto a name another tool of the backend keeps is refused (logged as an error; the tool
    keeps its own name); an override naming no listed tool is a warning."""
    overrides = spec.tools.overrides
    log = logger.bind(backend=spec.id)
    listed = {t.name for t in tools}
    for unknown in sorted(set(overrides) - listed):
        log.warning(
            "tools.overrides names {!r}, which the backend does not offer (offered: {}); check the name",
            unknown,
            ", ".join(sorted(listed)) or "nothing",
        )
    kept = {t.name for t in tools if not (t.name in overrides and overrides[t.name].name)}
    result = []
    for tool in tools:
        override = overrides.get(tool.name)
        if override is None:
            result.append(Offered(tool, tool.name))
            continue
        name = override.name or tool.name
        if name != tool.name and name in kept:
            log.error(
                "tools.overrides renames {!r} to {!r}, which the backend's own tool {!r} is called: "
                "{!r} keeps its name; choose another",
                tool.name,
                name,
                name,
                tool.name,
            )
            name = tool.name
        shown = _shown(tool, name, override.description, override.arguments)
        result.append(Offered(shown, tool.name, override.arguments))
    return result


def _shown(tool: types.Tool, name: str, description: str | None, pinned: Mapping[str, Any]) -> types.Tool:
    update: dict[str, Any] = {"name": name}
    if description is not None:
        update["description"] = description
    if pinned:
        schema = copy.deepcopy(dict(tool.input_schema or {}))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            schema["properties"] = {k: v for k, v in properties.items() if k not in pinned}
        required = schema.get("required")
        if isinstance(required, list):
            schema["required"] = [k for k in required if k not in pinned]
        update["input_schema"] = schema
    return tool.model_copy(update=update)


def merged(arguments: dict[str, Any], pinned: Mapping[str, Any]) -> dict[str, Any]:
    """What the backend receives: the caller's arguments with the fixed ones (callers cannot give those:
    `CatalogTool.validation_error` refuses them first)."""
    return {**arguments, **pinned} if pinned else arguments
