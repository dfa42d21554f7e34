"""What a catalog offers the offline planner, derived once per index (`Offered.of`): whether a tool takes a goal in
plain words ("check that X works" needs it), what the test runner's other tools already run, every choice the
tools choose among (a "without" part leaves out only those), the ones written as ids ("settings-language"), and
the words of each tool's name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentify.planner.catalog import CatalogTool
from agentify.planner.offline.extract import Mentions
from agentify.planner.offline.roles import choices, takes_goal
from agentify.planner.retrieval import ToolIndex
from agentify.planner.words import words

IDENTIFIER = re.compile(r"(?<![\w./-])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w/-])")
GOAL_FILLER = frozenset(
    words("check verify confirm ensure make sure test tests pass passes work works still flow fine ok")
    + words("app device phone emulator simulator")  # where: "check on the device that login still works"
)


@dataclass(frozen=True)
class Offered:
    """What the catalog behind one index offers (see the module docstring); `names` and `values`: what the test
    runner's other tools already run, their names' words and the values they choose among (scenario ids)."""

    index: ToolIndex
    taken: bool
    names: tuple[frozenset[str], ...]
    values: tuple[frozenset[str], ...]
    choices: frozenset[str] = frozenset()
    """Every choice of the catalog's tools, lowercased."""
    ids: frozenset[str] = frozenset()
    """The choices written as an id ("settings-language")."""
    tool_names: tuple[tuple[str, str, frozenset[str]], ...] = ()
    """Each tool's backend, name and the words of its name."""
    runners: frozenset[str] = frozenset()
    """The backends with a tool that takes a goal in plain words: test runners, whose tools run checks."""

    def names_of(self, tool: CatalogTool) -> list[frozenset[str]]:
        """The words of the names of the other tools of `tool`'s backend."""
        return [w for backend, name, w in self.tool_names if backend == tool.backend and name != tool.name]

    @classmethod
    def of(cls, index: ToolIndex) -> Offered:
        tools = list(index.catalog.tools.values())
        runners = {t.backend for t in tools if takes_goal(t)}
        tests = [t for t in tools if t.backend in runners and not takes_goal(t)]
        values = (frozenset(words(str(value))) for t in tests for value in choices(t))
        names = tuple(frozenset(words(t.tool.name)) for t in tests)
        every = frozenset(str(v).lower() for t in tools for v in choices(t))
        ids = frozenset(v for v in every if IDENTIFIER.fullmatch(v))
        named = tuple((t.backend, t.name, frozenset(words(t.tool.name))) for t in tools)
        return cls(index, bool(runners), names, tuple(v for v in values if v), every, ids, named, frozenset(runners))

    def named(self, goal: Mentions) -> bool:
        """Whether X is what the runner already runs: the words of a tool's name ("check that login works": the
        login tests) or exactly a value's ("check that the checkout still works": the checkout scenario, but not
        "check that the checkout shows 3 items"), so it goes there, not to an ad-hoc goal."""
        said = set(words(goal.query))
        rest = said - GOAL_FILLER
        return bool(rest) and (any(rest <= name for name in self.names) or any(rest <= v <= said for v in self.values))


def without_filler(text: str) -> str:
    return " ".join(token for token in text.split() if set(words(token)) - GOAL_FILLER)
