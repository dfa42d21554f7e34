"""The shortlist: what a model planner is shown when the catalog is large.

Tool-selection accuracy of models falls as the number of tools grows, and every tool's schema
costs prompt tokens on every task. When the catalog holds more than `planner.shortlist` tools,
a model planner is offered only the best-ranked tools for the task (by the hybrid ranking that
`search_tools` and the offline planner use), plus every tool of a backend the task names
("...with the browser"), so naming a backend always brings its whole toolset back into view.

The cut is not a fixed k: when the top scores are close (the tools after the first
`planner.shortlist` still score within `CLOSE` of the best one's, measured from the score of the
last tool it may grow to, so no tool stands out), the list grows over every tool that does, up to
`GROWTH` times the base size; a clear winner keeps the base size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentify.planner import Plan, TaskInput
from agentify.planner.catalog import Catalog, CatalogTool
from agentify.planner.indexes import IndexCache
from agentify.planner.offline.extract import analyse
from agentify.planner.retrieval import ToolIndex

CLOSE = 0.3
"""Tools beyond the base size join while their score is at least this share of the best one's (chosen on the
public sets' tuning parts: `agentify eval all --mode public --part tune`)."""
GROWTH = 2
"""The shortlist grows to at most this many times `planner.shortlist`."""


def shortlist(index: ToolIndex, task: TaskInput, limit: int) -> list[CatalogTool]:
    """The tools to offer for `task`: all of them when there are at most `limit`; otherwise the
    `limit` best-ranked ones and those that score close to the last of them (see the module's
    docstring), best first, then the other tools of every backend the task names."""
    tools = list(index.catalog.tools.values())
    if len(tools) <= limit:
        return tools
    mentions = analyse(task)
    ranked = index.search(mentions.query, mentions.terms(), limit * GROWTH)
    size = min(limit, len(ranked))
    if ranked:
        floor = ranked[-1].score  # the score of the last tool the list may grow to: what "far below" means here
        bar = floor + CLOSE * (ranked[0].score - floor)
        while size < len(ranked) and ranked[size].score > floor and ranked[size].score >= bar:
            size += 1
    best = [r.tool for r in ranked[:size]]
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
