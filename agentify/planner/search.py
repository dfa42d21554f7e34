"""`search_tools`: the best tools of every backend for a query, ranked by the planners' index.

The ranking is the offline planner's (`offline.rank`: the retrieval index weighted by how
much of a tool's name the query says), so what the IDE's model is shown is what a planner
would consider first. Tools with no matching word at all are never returned.
"""

from __future__ import annotations

from agentify.planner import TaskInput
from agentify.planner.offline import rank
from agentify.planner.offline.extract import analyse
from agentify.planner.retrieval import Ranked, ToolIndex


def search_tools(index: ToolIndex, query: str, limit: int) -> list[Ranked]:
    mentions = analyse(TaskInput(query=query))
    return [r for r in rank(index, mentions) if r.score > 0][:limit]
