"""Catalogs recorded from the real example backends (no processes), and tasks to plan on them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agentify.errors import NoPlan
from agentify.eval.routing import load_backends
from agentify.planner import NeedsArguments, Plan, TaskInput
from agentify.planner.catalog import Catalog
from agentify.planner.offline import OfflinePlanner

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TOOLS = Path(__file__).parent / "fixtures" / "example-tools.json"
GENERATED_TOOLS = REPO / "examples" / "eval" / "generated-tools.json"
EXAMPLES = REPO / "examples"


def example_catalog(*, generated: bool = False) -> Catalog:
    """The 47 tools of filesystem, browser and arbigent; with `generated`, 606 synthetic ones more."""
    backends = load_backends(EXAMPLE_TOOLS) + (load_backends(GENERATED_TOOLS) if generated else [])
    return Catalog.build(backends)


def catalog_of(*tools: types.Tool, backend: str = "demo", description: str = "") -> Catalog:
    return Catalog.build([(backend, description, list(tools))])


def tool(name: str, description: str = "", properties: dict[str, Any] | None = None, *required: str) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}, "required": list(required)}
    return types.Tool(name=name, description=description, input_schema=schema)


def task(query: str, cwd: Path | str | None = EXAMPLES, document: Path | None = None) -> TaskInput:
    context: dict[str, Any] = {"currentWorkingDirectory": str(cwd) if cwd else None}
    if document is not None:
        context["activeDocumentURI"] = document.as_uri()
    return TaskInput.model_validate({"query": query, "context": context})


async def plan(query: str, catalog: Catalog | None = None, **where: Any) -> Plan:
    """The offline planner's plan for `query` (on the example tools unless `catalog`), in `task`'s context."""
    return await OfflinePlanner().plan(task(query, **where), example_catalog() if catalog is None else catalog)


async def refusal(query: str, catalog: Catalog | None = None, **where: Any) -> str:
    """The message of the offline planner's refusal (`no_plan`) of `query`, one that would not ask the user."""
    with pytest.raises(NoPlan) as caught:
        await plan(query, catalog, **where)
    assert not isinstance(caught.value, NeedsArguments), f"it would ask for {caught.value.missing}"
    return caught.value.message


async def asks(query: str, catalog: Catalog | None = None, **where: Any) -> NeedsArguments:
    """The offline planner's plan for `query` that asks the user for the arguments the task does not say."""
    with pytest.raises(NeedsArguments) as caught:
        await plan(query, catalog, **where)
    return caught.value
