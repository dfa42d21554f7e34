"""The Arbigent project file: loading it, and the scenario selection rules of `arbigent run`.

The selection functions mirror the real CLI (see docs/arbigent-cli-facts.md) so that tool
descriptions and `list-arbigent-scenarios` say exactly what a run will execute.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentify.arbigent.errors import ProjectError


@dataclass(frozen=True, kw_only=True)
class Scenario:
    id: str
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
        object.__setattr__(self, "_by_id", {s.id: s for s in self.scenarios})

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.scenarios]

    def get(self, scenario_id: str) -> Scenario | None:
        return self._by_id.get(scenario_id)

    def tags(self) -> list[str]:
        """Distinct tag names in order of first appearance."""
        return list(dict.fromkeys(tag for s in self.scenarios for tag in s.tags))

    def chain(self, scenario_id: str) -> list[str]:
        """The ids a run of `scenario_id` executes, root first, ending with the scenario itself."""
        chain: list[str] = []
        current: str | None = scenario_id
        while current is not None:
            chain.append(current)
            current = self._by_id[current].dependency
        return chain[::-1]

    def select_all(self) -> list[str]:
        """`arbigent run` without filters: the leaves (scenarios nobody depends on), in file order."""
        depended_on = {s.dependency for s in self.scenarios if s.dependency is not None}
        return [s.id for s in self.scenarios if s.id not in depended_on]

    def select_tags(self, tags: Collection[str]) -> list[str]:
        """`--tags`: scenarios with any of the tags, minus those inside another candidate's chain."""
        candidates = [s.id for s in self.scenarios if any(tag in tags for tag in s.tags)]
        inside = {dep for c in candidates for dep in self.chain(c)[:-1]}
        return [c for c in candidates if c not in inside]

    def select_ids(self, ids: Iterable[str]) -> list[str]:
        """`--scenario-ids`: the known ids among those given, in file order (unknown ids are dropped)."""
        wanted = set(ids)
        return [s.id for s in self.scenarios if s.id in wanted]


def load_project(path: Path) -> Project:
    """Reads and checks a project file.

    Raises:
        ProjectError: missing, unreadable, not YAML (with line and column), or not an Arbigent project.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProjectError(f"project file not found: {path}") from None
    except IsADirectoryError:
        raise ProjectError(f"project file is a directory, not a file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ProjectError(f"project file {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ProjectError(f"cannot read project file {path}: {exc.strerror or exc}") from None
    return parse_project(text, path)


def parse_project(text: str, path: Path) -> Project:
    """Parses project YAML; `path` is only used in messages and kept on the result."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProjectError(f"project file {path} is not valid YAML: {_describe_yaml_error(exc)}") from None
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
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _parse_scenario(item: Any, index: int, path: Path) -> Scenario:
    where = f"project file {path}, scenario #{index + 1}"
    if not isinstance(item, dict):
        raise ProjectError(f"{where}: each scenario must be a map with an `id`, not {type(item).__name__}")
    scenario_id = item.get("id")
    if not isinstance(scenario_id, str) or not scenario_id:
        raise ProjectError(f"{where}: `id` is missing or not a string")
    where = f"project file {path}, scenario '{scenario_id}'"
    dependency = item.get("dependency")
    if dependency is not None and not isinstance(dependency, str):
        raise ProjectError(f"{where}: `dependency` must be the id of another scenario")
    goal = item.get("goal")
    return Scenario(
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
            raise ProjectError(f"{where}: {shape}, found {tag!r}")
        names.append(name)
    return tuple(dict.fromkeys(names))


def _check_references(scenarios: tuple[Scenario, ...], path: Path) -> None:
    by_id: dict[str, Scenario] = {}
    for s in scenarios:
        if s.id in by_id:
            raise ProjectError(f"project file {path}: scenario id '{s.id}' is used twice")
        by_id[s.id] = s
    for s in scenarios:
        seen = [s.id]
        current = s.dependency
        while current is not None:
            if current not in by_id:
                raise ProjectError(
                    f"project file {path}: scenario '{seen[-1]}' depends on unknown scenario '{current}'"
                )
            if current in seen:
                cycle = " -> ".join([*seen[seen.index(current) :], current])
                raise ProjectError(f"project file {path}: dependency cycle {cycle}")
            seen.append(current)
            current = by_id[current].dependency
