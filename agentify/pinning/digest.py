"""What a pin is of: a tool's definition as its backend lists it, and the sha256 of its canonical JSON.

The definition holds the name, title, description, input and output schemas and annotations: all
that reaches a model. It is the backend's own form (before `tools.overrides`), so changing an
override never looks like a change of the backend. `_meta` is left out: it carries no text a model
reads, and servers put changing values there.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any

import mcp_types as types

FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The parts of a tool a pin covers, in the order a difference names them."""


def definition(tool: types.Tool) -> dict[str, Any]:
    """The pinned parts of `tool`, as plain JSON (absent parts left out)."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: dumped[key] for key in FIELDS if key in dumped}


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same definition always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(defined: dict[str, Any]) -> str:
    """The sha256 (hex) of a definition's canonical JSON."""
    return hashlib.sha256(canonical(defined).encode()).hexdigest()


def changed_parts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Which parts differ between two definitions (`description`, `inputSchema`, ...)."""
    return [key for key in FIELDS if canonical(old.get(key)) != canonical(new.get(key))]


def difference(old: dict[str, Any] | None, new: dict[str, Any], label: str) -> str:
    """A unified diff of the two definitions, pretty-printed, one part after another (an empty `old`:
    everything is new)."""
    before = _lines(old or {})
    after = _lines(new)
    lines = difflib.unified_diff(before, after, f"{label} (pinned)", f"{label} (now)", lineterm="", n=2)
    return "\n".join(lines)


def _lines(defined: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in FIELDS:
        if key not in defined:
            continue
        value = defined[key]
        if isinstance(value, str):
            out.append(f"{key}:")
            out.extend(f"  {line}" for line in value.splitlines() or [""])
        else:
            out.append(f"{key}:")
            out.extend(f"  {line}" for line in json.dumps(value, indent=2, sort_keys=True).splitlines())
    return out
