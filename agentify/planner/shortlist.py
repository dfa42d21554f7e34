"""The shortlist: what a model planner is shown when the catalog is large.

Tool-selection accuracy of models falls as the number of tools grows, and every tool's schema
costs prompt tokens on every task. When the catalog holds more than `planner.shortlist` tools,
a model planner is offered only the best-ranked tools for the task (by the same retrieval index
the offline planner uses), plus every tool of a backend the task names ("...with the browser"),
so naming a backend always brings its whole toolset back into view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentify.planner import Plan, TaskInput
from agentify.planner.catalog import Catalog, CatalogTool
from agentify.planner.offline.extract import analyse
from agentify.planner.retrieval import IndexCache, ToolIndex


def shortlist(index: ToolIndex, task: TaskInput, limit: int) -> list[CatalogTool]:
    """The tools to offer for `task`: all of them when there are at most `limit`; otherwise the
    `limit` best-ranked ones, best first, then the other tools of every backend the task names."""
    tools = list(index.catalog.tools.values())
    if len(tools) <= limit:
        return tools
    mentions = analyse(task)
    best = [r.tool for r in index.rank(mentions.terms())[:limit]]
    named = index.named_backends(mentions.user_text)
    chosen = {t.name for t in best}
    return best + [t for t in tools if t.backend in named and t.name not in chosen]


class ModelPlanner(Protocol):
    """A planner that sends the offered tools to a model (openai, sampling)."""

    name: str

    async def plan(self, task: TaskInput, catalog: Catalog, offered: Sequence[CatalogTool] | None = None) -> Plan: ...


class Shortlisted:
    """A model planner that is offered only the shortlist of a catalog larger than `limit`.

    The planner records what it was offered (`PlanUsage.tools_offered`) and what it cost.
    """

    def __init__(self, planner: ModelPlanner, indexes: IndexCache, limit: int) -> None:
        self.name = planner.name
        self.planner = planner
        self._indexes = indexes
        self._limit = limit

    async def plan(self, task: TaskInput, catalog: Catalog) -> Plan:
        offered = shortlist(self._indexes.get(catalog), task, self._limit) if len(catalog) > self._limit else None
        return await self.planner.plan(task, catalog, offered)
