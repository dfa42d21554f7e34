"""The runner's tools, derived from a project: names, what each selects, and descriptions.

Tag to tool name: `run-arbigent-test-<tag>` with every character outside `[A-Za-z0-9_-]` replaced
by `_`. When several tags map to the same name (`a b` and `a_b`), the tag that needed no replacement
keeps the plain name and every other one gets a suffix made from a hash of the exact tag, so the
result does not depend on the order of the tags. A tag named `all` (which would take the name of
`run-arbigent-test-all`), an empty tag and a name beyond 64 characters get the hash suffix too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentify._common.naming import MAX_TOOL_NAME, digest_name, safe_name
from agentify.arbigent.project import Project

ALL_TOOL = "run-arbigent-test-all"
TAG_TOOL_PREFIX = "run-arbigent-test-"
LIST_TOOL = "list-arbigent-scenarios"
IDS_TOOL = "run-arbigent-scenarios"
TASK_TOOL = "run-arbigent-task"
LINT_TOOL = "check-arbigent-project"

_HASH_LENGTHS = (8, 16, 40)


@dataclass(frozen=True, kw_only=True)
class RunTool:
    """A tool that runs a fixed selection: all leaves (`tag is None`) or one tag."""

    name: str
    tag: str | None
    selects: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class ProjectTools:
    """What one project offers as tools: a run tool for all scenarios and one per selectable tag."""

    project: Project
    run_tools: tuple[RunTool, ...]
    unselectable_tags: tuple[str, ...]
    """Tags containing `,`: the CLI splits `--tags` on commas, so no tool can select them."""

    def find(self, name: str) -> RunTool | None:
        return next((tool for tool in self.run_tools if tool.name == name), None)


def build_catalog(project: Project) -> ProjectTools:
    tags = project.tags()
    selectable = [tag for tag in tags if "," not in tag]
    names: dict[str | None, str] = {None: ALL_TOOL}
    names.update(tag_tool_names(selectable))
    tools = []
    for tag in [None, *selectable]:
        selects = tuple(project.select_all() if tag is None else project.select_tags([tag]))
        tools.append(RunTool(name=names[tag], tag=tag, selects=selects, description=describe(project, tag, selects)))
    return ProjectTools(project, tuple(tools), tuple(tag for tag in tags if "," in tag))


def tag_tool_names(tags: Iterable[str]) -> dict[str, str]:
    """Maps each distinct tag to a unique tool name (see the module docstring for the rules)."""
    groups: dict[str, list[str]] = {}
    for tag in dict.fromkeys(tags):
        groups.setdefault(TAG_TOOL_PREFIX + safe_name(tag), []).append(tag)
    for length in _HASH_LENGTHS:
        names: dict[str, str] = {}
        for base, members in groups.items():
            plain_ok = base != ALL_TOOL and len(base) <= MAX_TOOL_NAME
            for tag in members:
                alone = len(members) == 1 and tag != ""
                exact = TAG_TOOL_PREFIX + tag == base
                names[tag] = base if plain_ok and (alone or exact) else _suffixed(base, tag, length)
        if len(set(names.values())) == len(names):
            return names
    raise AssertionError("tool names collide even with full-length hashes")  # pragma: no cover


def _suffixed(base: str, tag: str, length: int) -> str:
    return digest_name(base, tag, length=length, sep="-", algorithm="sha1")


def describe(project: Project, tag: str | None, selects: tuple[str, ...]) -> str:
    """A description naming the tag and the scenario ids the tool runs (and their chains)."""
    runs = _describe_selection(project, selects)
    if tag is None:
        head = (
            "Run the whole Arbigent test suite (`arbigent run` without filters): the leaf scenarios, "
            "each after its dependency chain, so every scenario is exercised."
        )
    else:
        head = f"Run the Arbigent tests tagged '{tag}' (`arbigent run --tags={tag}`)."
    return (
        f"{head} Runs: {runs}. Returns a one-line verdict, per-scenario results, the exit code and the "
        "paths of result.yml and report.html; a failing scenario makes the result an error naming it."
    )


def _describe_selection(project: Project, selects: tuple[str, ...]) -> str:
    if not selects:
        return "nothing (the project has no scenarios)"
    parts = []
    for scenario_id in selects:
        chain = project.chain(scenario_id)
        parts.append(scenario_id if len(chain) == 1 else f"{scenario_id} (after {' -> '.join(chain[:-1])})")
    return ", ".join(parts)
