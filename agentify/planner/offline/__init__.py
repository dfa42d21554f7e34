"""The offline planner: no model, rules over the retrieval index (`planner`), what a task says
(`extract`), how its values fill a tool's arguments (`fill`), and the words of known tools
(`vocabulary`). It refuses rather than guesses."""

from agentify.planner.offline.planner import OfflinePlanner, rank

__all__ = ["OfflinePlanner", "rank"]
