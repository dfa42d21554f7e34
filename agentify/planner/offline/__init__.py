"""The offline planner: no model, rules over the retrieval index (`planner`), what a task says
(`extract`), what it excludes or forbids (`negation`) and whether a plan leaves that out (`honour`),
what each argument takes (`roles`), how the task's values fill a tool's arguments (`fill`), when to
ask a person for the rest (`asking`), how sure the ranking is (`confidence`), and the words of known
tools (`vocabulary`). It refuses rather than guesses."""

from agentify.planner.offline.planner import OfflinePlanner, rank

__all__ = ["OfflinePlanner", "rank"]
