"""The Arbigent project file: loading it, and the scenario selection rules of `arbigent run`.

The selection functions mirror the real CLI (see docs/arbigent-cli-facts.md) so that tool
descriptions and `list-arbigent-scenarios` say exactly what a run will execute.

A scenario without an `id` is valid: the CLI gives it a random UUID on every load, so it cannot be
chosen by id, but it runs as part of "all" and of its tags. Here it is known by a `key` such as
`<unnamed scenario #3>` (its position in the file). The file is read through `yamlfile`, which
refuses FIFOs, oversized files and alias bombs with one line.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentify.arbigent.errors import ProjectError
from agentify.arbigent.yamlfile import YamlFileError, parse_yaml, read_text_file


@dataclass(frozen=True, kw_only=True)
class Scenario:
    key: str
    """The id, or `<unnamed scenario #N>` for a scenario without one."""
    id: str | None
    goal: str
    dependency: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Project:
    """A loaded project: scenarios in file order, dependencies checked to exist and be acyclic."""

    path: Path
    scenarios: tuple[Scenario, ...]
    _by_id: dict[str, Scenario] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {s.key: s for s in self.scenarios})

    @property
    def ids(self) -> list[str]:
        """The ids that can be selected with `--scenario-ids` (scenarios without an id have none)."""
        return [s.id for s in self.scenarios if s.id is not None]

    def get(self, scenario_id: str) -> Scenario | None:
        """The scenario with this id (never one without an id)."""
        scenario = self._by_id.get(scenario_id)
        return scenario if scenario is not None and scenario.id is not None else None

    def tags(self) -> list[str]:
        """Distinct tag names in order of first appearance."""
        return list(dict.fromkeys(tag for s in self.scenarios for tag in s.tags))

    def chain(self, scenario_id: str) -> list[str]:
        """The keys a run of `scenario_id` (a key) executes, root first, ending with the scenario itself."""
        chain: list[str] = []
        current: str | None = scenario_id
        while current is not None:
            chain.append(current)
            current = self._by_id[current].dependency
        return chain[::-1]

    def select_all(self) -> list[str]:
        """`arbigent run` without filters: the leaves (scenarios nobody depends on), in file order."""
        depended_on = {s.dependency for s in self.scenarios if s.dependency is not None}
        return [s.key for s in self.scenarios if s.key not in depended_on]

    def select_tags(self, tags: Collection[str]) -> list[str]:
        """`--tags`: scenarios with any of the tags, minus those inside another candidate's chain."""
        candidates = [s.key for s in self.scenarios if any(tag in tags for tag in s.tags)]
        inside = {dep for c in candidates for dep in self.chain(c)[:-1]}
        return [c for c in candidates if c not in inside]

    def select_ids(self, ids: Iterable[str]) -> list[str]:
        """`--scenario-ids`: the known ids among those given, in file order (unknown ids are dropped)."""
        wanted = set(ids)
        return [s.key for s in self.scenarios if s.id is not None and s.id in wanted]


def load_project(path: Path) -> Project:
    """Reads and checks a project file. Blocking: call it off the event loop once serving.

    Raises:
        ProjectError: missing, not a regular file, too big, unreadable, not YAML (with line and
            column), aliases that expand too far, or not an Arbigent project.
    """
    try:
        text = read_text_file(path, what="project file")
    except YamlFileError as exc:
        raise ProjectError(str(exc)) from None
    return parse_project(text, path)


def parse_project(text: str, path: Path) -> Project:
    """Parses project YAML; `path` is only used in messages and kept on the result."""
    try:
        data = parse_yaml(text, f"project file {path}")
    except yaml.YAMLError as exc:
        raise ProjectError(f"project file {path} is not valid YAML: {_describe_yaml_error(exc)}") from None
    except YamlFileError as exc:
        raise ProjectError(str(exc)) from None
    if not isinstance(data, dict) or "scenarios" not in data:
        raise ProjectError(
            f"project file {path} has no top-level `scenarios` list; is it an Arbigent project file? "
            "(expected `scenarios:` followed by `- id: ...` entries)"
        )
    raw = data["scenarios"]
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ProjectError(f"project file {path}: `scenarios` must be a list, not {type(raw).__name__}")
    scenarios = tuple(_parse_scenario(item, index, path) for index, item in enumerate(raw))
    _check_references(scenarios, path)
    return Project(path, scenarios)


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())[:200]
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _brief(value: Any) -> str:
    """A short description of a YAML value for an error line, never a walk of a big structure."""
    if isinstance(value, dict | list):
        return f"a {'map' if isinstance(value, dict) else 'list'} of {len(value)} entries"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_scenario(item: Any, index: int, path: Path) -> Scenario:
    where = f"project file {path}, scenario #{index + 1}"
    if not isinstance(item, dict):
        raise ProjectError(f"{where}: each scenario must be a map with a `goal`, not {type(item).__name__}")
    scenario_id = item.get("id")
    if scenario_id is not None and (not isinstance(scenario_id, str) or not scenario_id):
        raise ProjectError(f"{where}: `id` must be a non-empty string, not {_brief(scenario_id)}")
    if scenario_id is not None:
        where = f"project file {path}, scenario '{scenario_id}'"
    dependency = item.get("dependency")
    if dependency is not None and not isinstance(dependency, str):
        raise ProjectError(f"{where}: `dependency` must be the id of another scenario")
    goal = item.get("goal")
    return Scenario(
        key=scenario_id if scenario_id is not None else f"<unnamed scenario #{index + 1}>",
        id=scenario_id,
        goal=goal if isinstance(goal, str) else "",
        dependency=dependency or None,
        tags=_parse_tags(item.get("tags"), where),
    )


def _parse_tags(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    shape = '`tags` must be a list of maps like `- name: "login"`'
    if not isinstance(raw, list):
        raise ProjectError(f"{where}: {shape}")
    names: list[str] = []
    for tag in raw:
        name = tag.get("name") if isinstance(tag, dict) else None
        if not isinstance(name, str):
            raise ProjectError(f"{where}: {shape}, found {_brief(tag)}")
        names.append(name)
    return tuple(dict.fromkeys(names))


def _check_references(scenarios: tuple[Scenario, ...], path: Path) -> None:
    """Unique ids, known dependencies, no cycles; linear in the number of scenarios."""
    by_id: dict[str, Scenario] = {}
    for s in scenarios:
        if s.key in by_id:
            raise ProjectError(f"project file {path}: scenario id '{s.key}' is used twice")
        by_id[s.key] = s
    for s in scenarios:
        if s.dependency is not None and (s.dependency not in by_id or by_id[s.dependency].id is None):
            raise ProjectError(f"project file {path}: scenario '{s.key}' depends on unknown scenario '{s.dependency}'")
    checked: set[str] = set()
    for s in scenarios:
        seen, on_path = [s.key], {s.key}
        current = s.dependency
        while current is not None and current not in checked:
            if current in on_path:
                cycle = " -> ".join([*seen[seen.index(current) :], current])
                raise ProjectError(f"project file {path}: dependency cycle {cycle}")
            seen.append(current)
            on_path.add(current)
            current = by_id[current].dependency
        checked.update(seen)
