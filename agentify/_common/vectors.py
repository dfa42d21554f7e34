"""Tool vectors kept beside a backend's tool manifest, without the backends knowing what they are.

The planner's retrieval (`planner.retrieval`) registers how to make them from a backend's tools and
how to take them back (`register`); a manifest only stores what `keep` gives and hands what it read
to `restore`. Nothing is registered until the planner is imported, and then nothing is made until
its model is loaded, so saving a manifest never loads a model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types

Keeper = Callable[[str, list[types.Tool]], dict[str, str]]
"""(the backend's description, its tools) -> their vectors as JSON-ready text, by key."""
Restorer = Callable[[Any], None]

_hooks: tuple[Keeper, Restorer] | None = None


def register(keeper: Keeper, restorer: Restorer) -> None:
    global _hooks
    _hooks = (keeper, restorer)


def keep(description: str, tools: list[types.Tool]) -> dict[str, str]:
    """The vectors to store for these tools; empty when nothing is registered or the model is not loaded."""
    return _hooks[0](description, tools) if _hooks is not None else {}


def restore(data: Any) -> None:
    """Hands vectors read from a manifest back to the planner (anything unusable in them is ignored)."""
    if _hooks is not None and data:
        _hooks[1](data)
