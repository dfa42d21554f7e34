"""The runner's tool schemas, generated from pydantic models as the gateway's are (`agentify._common.schemas`).

The input models give each tool's `inputSchema`; `tools.selection_for` checks a call against the
same bounds and says what is wrong in the runner's own words. `RunOutput` is every run tool's
`outputSchema` and builds its `structuredContent`: a value that is not known (no exit code after a
kill, no result file, no stored run) is left out rather than sent as null.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.alias_generators import to_camel

from agentify._common.schemas import tool_schema
from agentify.arbigent.devices import MAX_DEVICE_ID

MAX_GOAL_CHARS = 4000
MAX_STEP, MAX_RETRY = 1000, 100


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=True)


class NoArguments(_Arguments):
    """The listing and the project lint: they take nothing."""


class RunArguments(_Arguments):
    """The run tools of a tag or of all scenarios; the base of every run tool's arguments."""

    device_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_DEVICE_ID,
        description=(
            "The device to run on, as `adb devices` or `xcrun simctl list` shows it (e.g. emulator-5554, a "
            "simulator or iPhone UDID). Needed when several devices are connected; default: the runner's "
            "--device-id, else the only connected device."
        ),
    )


class TaskArguments(RunArguments):
    """`run-arbigent-task`."""

    goal: str = Field(
        min_length=1,
        max_length=MAX_GOAL_CHARS,
        description="What the AI agent should do or check in the app, in plain words.",
    )
    max_step: int | None = Field(
        default=None,
        ge=1,
        le=MAX_STEP,
        description="Most steps the agent may take (default: the config's max-step, else 10).",
    )
    max_retry: int | None = Field(
        default=None,
        ge=0,
        le=MAX_RETRY,
        description="Retries when the goal is not achieved (default: the config's max-retry, else 3).",
    )


def scenario_ids_schema(ids: list[str]) -> dict[str, Any]:
    """`run-arbigent-scenarios`: at least one id, each one of the project's (any string when it has none)."""
    item: Any = Literal[tuple(ids)] if ids else str
    model = create_model(
        "ScenarioIdsArguments",
        __base__=RunArguments,
        scenario_ids=(list[item], Field(min_length=1)),
    )
    return tool_schema(model)


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True)


class ScenarioOutcome(_Output):
    id: str
    success: bool


class Screenshot(_Output):
    scenario_id: str
    uri: str
    attached: bool


class RunOutput(_Output):
    """The `structuredContent` of a run."""

    status: Literal["passed", "failed", "empty", "timeout"]
    exit_code: int | None = None
    scenarios: list[ScenarioOutcome]
    result_file: str | None = None
    report_file: str | None = None
    duration_ms: int
    run_id: str | None = None
    screenshots: list[Screenshot]
    stdout_tail: str
    stderr_tail: str
    devices: list[str] | None = Field(
        default=None, description="The device ids arbigent listed when it could not choose one; pass one as deviceId."
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class LintOutput(_Output):
    """The `structuredContent` of `check-arbigent-project`."""

    sorted: bool = Field(description="True when `arbigent sort` would change nothing.")
    diff: str = Field(description="The unified diff `arbigent sort` would apply; empty when sorted.")
    exit_code: int

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


NO_ARGUMENTS = tool_schema(NoArguments)
RUN_INPUT = tool_schema(RunArguments)
TASK_INPUT = tool_schema(TaskArguments)
RUN_OUTPUT = tool_schema(RunOutput)
LINT_OUTPUT = tool_schema(LintOutput)
