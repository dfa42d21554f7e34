"""Plans that would do the opposite of what their task's words ask, whatever the ranking says (`contrary`): a check
("verify that ...") with a tool that declares it changes things, unless it is a test runner's, and a stop ("stop
the login tests", "pause the smoke run") with a tool named for running or starting. A review found the offline
planner creating a folder for the one and running the tests for the other."""

from __future__ import annotations

import re

from agentify.planner.catalog import CatalogTool
from agentify.planner.words import words

CHECKING = re.compile(r"(?:please\s+)?(?:check|verify|confirm|ensure|make\s+sure)\b", re.IGNORECASE)
STOPPING = frozenset(words("stop stopping cancel abort kill pause halt interrupt terminate"))
STARTING = frozenset(words("run start launch execute"))


def contrary(tool: CatalogTool, query: str, runners: frozenset[str]) -> str | None:
    """Why calling `tool` would do the opposite of `query`, if it would; `runners`: the test runners' backends."""
    label = f"{tool.backend}.{tool.tool.name}"
    if STOPPING & set(words(query)) and STARTING & set(words(tool.tool.name)):
        return f"the task asks to stop something, and the closest tool, {label}, starts it"
    changes = tool.tool.annotations is not None and tool.tool.annotations.read_only_hint is False
    if changes and CHECKING.match(query.lstrip()) and tool.backend not in runners:
        return f"the task asks to check something, and the closest tool, {label}, may change it"
    return None
