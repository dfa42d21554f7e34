"""Planners: turn a task (query + IDE context) into exactly one backend tool call.

The `Planner` protocol is what the task runner sees; `openai.py` implements it today,
and `catalog.py` holds what every planner shares (tool naming, argument validation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentify.errors import Missing, NoPlan
from agentify.planner.catalog import Catalog

if TYPE_CHECKING:
    from agentify.backends.handles import ToolHandle


class TaskContext(BaseModel):
    """What the IDE knows about where the user is; every field optional."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore")

    active_document_uri: str | None = Field(
        default=None, alias="activeDocumentURI", description="file:// URI of the open document"
    )
    current_working_directory: str | None = Field(
        default=None, description="the workspace folder, where relative paths resolve"
    )
    selection_text: str | None = Field(default=None, description="the selected text, if any")


class TaskInput(BaseModel):
    """The input of `orchestrate_task` and `plan_task`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(
        min_length=1,
        description="What to do, in plain words: 'read README.md', 'run the login tests', "
        "'open localhost:3000/login and show me the page'.",
    )
    context: TaskContext | None = Field(
        default=None, description="Where the user is in the IDE, so relative paths resolve."
    )


@dataclass(frozen=True, kw_only=True)
class PlanUsage:
    """What planning cost: recorded on the task's trace."""

    provider: str
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    tools_offered: int = 0


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One tool call chosen by a planner; its arguments already validated against the tool's schema."""

    backend: str
    tool: str
    arguments: dict[str, Any]
    planner: str
    reasoning: str | None = None
    usage: PlanUsage = field(default_factory=lambda: PlanUsage(provider="none"))
    handle: ToolHandle | None = field(default=None, repr=False, compare=False)  # the resolved tool to call


class NeedsArguments(NoPlan):
    """The planner is sure of the tool but the task does not say every required argument: `plan` holds the
    arguments it did fill (so it is not valid yet), `missing` the tool and the others, each one a form may ask a
    person for (`form.py`). `orchestrate_task` asks for them and runs the plan (`gateway/asked_arguments.py`);
    to anyone who cannot ask, it is the `no_plan` it says it is, with the tool and the arguments in its `_meta`."""

    missing: Missing

    def __init__(
        self,
        message: str,
        candidates: list[dict[str, str]],
        plan: Plan,
        missing: Missing,
        read: Callable[[str, Any], Any] | None = None,
    ) -> None:
        """`read(name, value)`: a value the user gave for the argument `name`, as the planner reads the task's own
        (a relative path resolved against the task's working directory, a bare host made a URL)."""
        super().__init__(message, candidates, missing=missing)
        self.plan = plan
        self._read = read

    def answered(self, values: dict[str, Any]) -> dict[str, Any]:
        """The plan's arguments with the user's `values` for the missing ones, read as the task's own values are."""
        given = {n: self._read(n, v) if self._read else v for n, v in values.items() if n in self.missing.arguments}
        return self.plan.arguments | given


class Planner(Protocol):
    """Chooses one tool for a task. Raises NoPlan, InvalidPlan, PlannerError or PlannerUnavailable."""

    name: str

    async def plan(self, task: TaskInput, catalog: Catalog) -> Plan: ...
