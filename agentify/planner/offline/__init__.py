"""The offline planner: no model, rules over the retrieval index (`planner`), what a catalog offers it
(`offered`), what a task says (`extract`), what it excludes or forbids (`negation`), what the arguments
leave out of that (`left_out`) and whether that honours it (`honour`), what each argument takes (`roles`),
how the task's values fill a tool's arguments (`fill`), plans that would do the opposite of the task
(`contrary`), when to ask a person for the rest (`asking`), how sure the ranking is (`confidence`), and the
words of known tools (`vocabulary`). It refuses rather than guesses."""

from agentify.planner.offline.planner import OfflinePlanner, rank

__all__ = ["OfflinePlanner", "rank"]
