"""Whether the offline planner, sure of a tool whose required arguments the task does not say, may ask a person
for them in a form (`asking`), and the `NeedsArguments` refusal that does (`needs`).

A person is asked only when their answers complete the plan: the task left no value unplaced, each missing
argument is one a form may carry (`form.py`: no credential, no object) and no element ref of a page snapshot (only
a model that read the page knows one), and what the planner did fill fits the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentify.errors import InvalidInput, Missing, PlannerUnavailable
from agentify.planner import NeedsArguments, Plan
from agentify.planner.catalog import CatalogTool
from agentify.planner.form import NotAskable, form_schema
from agentify.planner.offline.extract import as_url, resolve_path
from agentify.planner.offline.fill import Filling
from agentify.planner.offline.roles import Role, role

NO_BASE = "give an absolute path, or send currentWorkingDirectory (the working directory) with the task"


@dataclass(frozen=True)
class Ask:
    """A tool the planner is sure of, with what it filled and the required arguments a person is to give."""

    tool: CatalogTool
    filling: Filling
    why: str
    roles: Mapping[str, Role]
    """The role of each argument to ask for (`roles.role`): a path or URL answer is read as the task's own."""

    @property
    def missing(self) -> Missing:
        return Missing(self.tool.name, self.tool.backend, self.tool.tool.name, self.filling.unfilled)


class Unfilled(PlannerUnavailable):
    """The rules' refusal of a tool they chose, for arguments the task does not say (`ask`: when a form can ask
    for them), so that the hybrid ranking may still answer in full first."""

    def __init__(self, message: str, ask: Ask | None) -> None:
        super().__init__(message)
        self.ask = ask


def asking(tool: CatalogTool, filling: Filling, why: str, problem: str, base: str | None) -> Ask | str:
    """What to ask a person for, when their answers complete the plan; else why not, in the words of the
    refusal (`problem`: what is wrong with the filling): a value of the task no argument takes, a path with no
    working directory (`base`) to read it in (the task may have said it: asking again would not help), an element
    ref, an argument a form must not or cannot ask for, or a filled value the tool's schema refuses."""
    if filling.unplaced or filling.ignored or not filling.unfilled:
        return problem
    properties = tool.input_schema.get("properties") or {}
    roles = {n: role(n, spec if isinstance(spec := properties.get(n), dict) else {}) for n in filling.unfilled}
    paths = [n for n, kind in roles.items() if kind in ("path", "paths")]
    if paths and base is None:
        return f"{problem}; for `{paths[0]}`, {NO_BASE}"
    refs = [n for n, kind in roles.items() if kind == "ref"]
    if refs:
        return f"{problem}, and a person cannot give `{refs[0]}`: it comes from a snapshot of the page"
    try:
        form_schema(tool.input_schema, filling.unfilled)
    except NotAskable as exc:
        return f"{problem} ({exc})"
    error = tool.validation_error(filling.arguments, absent=filling.unfilled)
    if error is not None:
        return f"{problem}, and what it did fill does not fit the tool: {error}"
    return Ask(tool, filling, why, roles)


def needs(ask: Ask, message: str, plan: Plan, candidates: list[dict[str, str]], base: str | None) -> NeedsArguments:
    """The refusal that asks for `ask`'s arguments; `plan` holds what the planner filled, `base` is the task's
    working directory (what a relative path the user types is in)."""
    return NeedsArguments(message, candidates, plan, ask.missing, partial(_read, ask.roles, base))


def _read(roles: Mapping[str, Role], base: str | None, name: str, value: Any) -> Any:
    """A path or URL the user typed, as a task's own: "notes.txt" in the working directory, "localhost:3000".

    Raises:
        InvalidInput: a relative path with no working directory to read it in (it is never sent unresolved).
    """
    if not isinstance(value, str) or roles.get(name) not in ("path", "url"):
        return value
    taken = resolve_path(value, base) if roles[name] == "path" else as_url(value)
    if taken is None and roles[name] == "path":
        raise InvalidInput(f"`{name}` is the relative path {value!r} but the task has no working directory: {NO_BASE}")
    return value if taken is None else taken
