"""The runner's MCP tools: their definitions, what a call selects, and the scenario listing."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from agentify.arbigent.catalog import IDS_TOOL, LINT_TOOL, LIST_TOOL, TASK_TOOL, ProjectTools
from agentify.arbigent.devices import DeviceChoiceError, check_device_id
from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.runs import Selection, Task
from agentify.arbigent.schemas import (
    LINT_OUTPUT,
    MAX_GOAL_CHARS,
    MAX_RETRY,
    MAX_STEP,
    NO_ARGUMENTS,
    RUN_INPUT,
    RUN_OUTPUT,
    TASK_INPUT,
    scenario_ids_schema,
)

_RUNS_TESTS = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
TASK_DESCRIPTION = (
    "Check or try one thing in the app right now, with no test scenario written for it: Arbigent's AI agent "
    'works on the device toward the goal you give (`arbigent run task GOAL`), for example "check that dark '
    'mode can be turned on in Settings". For a request like "check that ...", "verify that ..." or "make '
    'sure ..." that no run-arbigent-test tool covers. Returns whether the agent achieved the goal, its output, '
    "and when it did not, the last screenshot as an image; the run's files are resources."
)


def tools_for(catalog: ProjectTools, *, lint: bool = False) -> list[types.Tool]:
    """The tools of `catalog`; with `lint`, also the project lint (for CLIs that have `sort`)."""
    tools = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=RUN_INPUT,
            output_schema=RUN_OUTPUT,
            annotations=_RUNS_TESTS,
        )
        for tool in catalog.run_tools
    ]
    ids = catalog.project.ids
    tools.append(
        types.Tool(
            name=IDS_TOOL,
            description=(
                "Run chosen Arbigent scenarios by id (`arbigent run --scenario-ids=...`); each runs after its "
                f"dependency chain. Scenario ids: {', '.join(ids) or 'none'}. Returns the same result as the "
                "run-arbigent-test tools."
            ),
            input_schema=scenario_ids_schema(ids),
            output_schema=RUN_OUTPUT,
            annotations=_RUNS_TESTS,
        )
    )
    tools.append(
        types.Tool(
            name=TASK_TOOL,
            description=TASK_DESCRIPTION,
            input_schema=TASK_INPUT,
            output_schema=RUN_OUTPUT,
            annotations=_RUNS_TESTS,
        )
    )
    tools.append(
        types.Tool(
            name=LIST_TOOL,
            description=(
                "List the Arbigent scenarios of the project (ids, goals, tags, dependencies) and what each "
                "run-arbigent-test tool would run. Runs nothing."
            ),
            input_schema=NO_ARGUMENTS,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
    )
    if lint:
        tools.append(
            types.Tool(
                name=LINT_TOOL,
                description=(
                    "Lint the Arbigent project file's scenario order (`arbigent sort --diff`): is each scenario "
                    "placed after the one it depends on, with current position comments? Returns the unified diff "
                    "sort would apply, or that the file is already sorted. Never changes the file."
                ),
                input_schema=NO_ARGUMENTS,
                output_schema=LINT_OUTPUT,
                annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
            )
        )
    return tools


def selection_for(catalog: ProjectTools, name: str, arguments: dict[str, Any]) -> Selection:
    """The selection a tool call asks for.

    Raises:
        ToolCallError: unknown tool, or arguments missing, malformed or unknown.
    """
    refuse_unknown_keys(catalog, name, arguments)
    device = _device_id(arguments)
    if name == TASK_TOOL:
        return Selection(task=_task(arguments), device_id=device)
    known = ", ".join(catalog.project.ids) or "none"
    if name == IDS_TOOL:
        ids = arguments.get("scenarioIds")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ToolCallError(
                f'{IDS_TOOL} needs {{"scenarioIds": ["<id>", ...]}} with at least one id; known ids: {known}'
            )
        unknown = [i for i in ids if catalog.project.get(i) is None]
        if unknown:
            raise ToolCallError(f"unknown scenario id(s): {', '.join(unknown)}; the project has: {known}")
        if any("," in i for i in ids):
            raise ToolCallError(
                "a scenario id containing ',' cannot be selected: the arbigent CLI splits ids on commas"
            )
        return Selection(ids=tuple(dict.fromkeys(ids)), device_id=device)
    tool = catalog.find(name)
    if tool is None:
        names = ", ".join(t.name for t in tools_for(catalog))
        raise ToolCallError(f"unknown tool '{name}' (the project file may have changed); tools now: {names}")
    return Selection(tag=tool.tag, device_id=device)


def refuse_unknown_keys(catalog: ProjectTools, name: str, arguments: dict[str, Any]) -> None:
    """Every tool declares `additionalProperties: false`, so a key its schema does not name is refused,
    not ignored: a misspelt `maxStpe` must not silently run with the default.

    Raises:
        ToolCallError: naming the unknown keys and the tool's own.
    """
    tool = next((t for t in tools_for(catalog, lint=True) if t.name == name), None)
    if tool is None:
        return  # an unknown tool is selection_for's error
    allowed = set(tool.input_schema.get("properties") or {})
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no arguments"
        raise ToolCallError(f"{name} does not take {', '.join(unknown)}; it takes {takes}")


def _device_id(arguments: dict[str, Any]) -> str | None:
    value = arguments.get("deviceId")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolCallError(f"deviceId must be a string, not {value!r}")
    try:
        return check_device_id(value)
    except DeviceChoiceError as exc:
        raise ToolCallError(str(exc)) from None


def _task(arguments: dict[str, Any]) -> Task:
    usage = (
        f'{TASK_TOOL} needs {{"goal": "<what to do or check>", "maxStep"?: 1-{MAX_STEP}, "maxRetry"?: 0-100, '
        '"deviceId"?: "<device id>"}'
    )
    goal = arguments.get("goal")  # unknown keys were refused by refuse_unknown_keys
    if not isinstance(goal, str) or not goal.strip():
        raise ToolCallError(usage)
    goal = goal.strip()
    if len(goal) > MAX_GOAL_CHARS or "\0" in goal:
        raise ToolCallError(f"{TASK_TOOL}: the goal must be text of at most {MAX_GOAL_CHARS} characters")
    limits = {"maxStep": (1, MAX_STEP), "maxRetry": (0, MAX_RETRY)}
    values: dict[str, int | None] = {}
    for key, (low, high) in limits.items():
        value = arguments.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
            raise ToolCallError(f"{TASK_TOOL}: {key} must be a whole number from {low} to {high}, not {value!r}")
        values[key] = value
    return Task(goal, values["maxStep"], values["maxRetry"])


def listing(catalog: ProjectTools) -> types.CallToolResult:
    project = catalog.project
    scenarios = [
        {
            "id": s.id,
            "key": s.key,
            "goal": s.goal,
            "tags": list(s.tags),
            "dependency": s.dependency,
            "chain": project.chain(s.key),
        }
        for s in project.scenarios
    ]
    tools = [{"name": t.name, "tag": t.tag, "selects": list(t.selects)} for t in catalog.run_tools]
    lines = [f"Project: {project.path} ({len(scenarios)} scenarios)", "Scenarios:"]
    for s in project.scenarios:
        after = f" (after {s.dependency})" if s.dependency else ""
        tags = f" [tags: {', '.join(s.tags)}]" if s.tags else ""
        lines.append(f"  {s.key}{after}{tags}: {s.goal}")
    lines.append("Tools:")
    lines += [f"  {t.name} runs: {', '.join(t.selects) or 'nothing'}" for t in catalog.run_tools]
    if catalog.unselectable_tags:
        lines.append(f"Tags containing ',' (the CLI cannot select them): {', '.join(catalog.unselectable_tags)}")
    if any(s.id is None for s in project.scenarios):
        lines.append("Scenarios without an id run with their tags and in 'all'; they cannot be chosen by id.")
    structured = {
        "projectFile": str(project.path),
        "scenarios": scenarios,
        "tools": tools,
        "unselectableTags": list(catalog.unselectable_tags),
    }
    return types.CallToolResult(content=[types.TextContent(text="\n".join(lines))], structured_content=structured)
