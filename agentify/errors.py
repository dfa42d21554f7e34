"""The error tree of agentify: one subclass per error code of the contract (DESIGN.md).

    AgentifyError                      code
    ├── InvalidInput                   invalid_input
    ├── NoPlan                         no_plan
    │   └── NeedsArguments             no_plan (sure of the tool, not of its arguments: agentify.planner, asked by form)
    ├── PlannerUnavailable             planner_unavailable
    ├── PlannerError                   planner_error
    ├── InvalidPlan                    invalid_plan
    ├── BackendUnavailable             backend_unavailable
    │   └── NeedsAuth                  needs_auth (a person must authorize a backend: the text holds the URL)
    ├── BackendError                   backend_error
    ├── TaskTimeout                    timeout
    ├── TaskCancelled                  cancelled
    ├── Denied                         denied
    │   └── Declined                   denied (the user said no: logged at INFO, not as a failure)
    ├── RateLimited                    rate_limited (with retry_after_seconds)
    ├── Forbidden                      forbidden (server.access refuses the principal this item)
    ├── ToolChanged                    tool_changed (a pinned tool changed, or is suspect: withheld until approved)
    └── InternalError                  internal_error (a bug in agentify itself: see its log by trace id)

    ConfigError                        (start-up only: exit code 2, never reaches a client; defined in
                                        agentify._common.errors, shared with the arbigent runner)

Lower layers (OpenAI, MCP, subprocesses) are translated into this tree where they are
called, with `raise ... from exc`; the MCP result is built from it in `results.py` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from agentify._common.errors import ConfigError

__all__ = [
    "ERROR_CODES",
    "AgentifyError",
    "BackendError",
    "BackendUnavailable",
    "ConfigError",
    "Declined",
    "Denied",
    "Forbidden",
    "InternalError",
    "InvalidInput",
    "InvalidPlan",
    "Missing",
    "NeedsAuth",
    "NoPlan",
    "PlannerError",
    "PlannerUnavailable",
    "RateLimited",
    "TaskCancelled",
    "TaskTimeout",
    "ToolChanged",
]


class AgentifyError(Exception):
    """A failure a person and a model can act on: `message` says what went wrong and what to do."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.trace_id: str | None = None


class InvalidInput(AgentifyError):
    code = "invalid_input"


@dataclass(frozen=True)
class Missing:
    """The tool a planner chose and the required arguments the task did not give: what the client's model needs
    to call it itself (`call_tool`) or to say them in the task again."""

    name: str
    """The tool as the gateway names it (`<backend>__<tool>`)."""
    backend: str
    tool: str
    arguments: tuple[str, ...]

    def meta(self) -> dict[str, Any]:
        """`_meta["agentify/error"]`'s `chosen` and `missing`."""
        chosen = {"name": self.name, "backend": self.backend, "tool": self.tool}
        return {"chosen": chosen, "missing": list(self.arguments)}

    def said(self, names: tuple[str, ...] | None = None) -> str:
        """The arguments `names` (all the missing ones by default) as a sentence names them: `a` and `b`."""
        return " and ".join(f"`{n}`" for n in (self.arguments if names is None else names))

    def instead(self) -> str:
        """What to do instead of answering a form for them: say them in the task, or call the tool directly."""
        return f"say the value of {self.said()} in the task (quote texts), or call {self.name} with call_tool"


class NoPlan(AgentifyError):
    """No tool fits clearly; `candidates` are the planner's best guesses (name, backend, tool, description),
    best first, shown in `_meta["agentify/error"]["candidates"]` so the client's model or the user can pick.
    `missing`: the tool it did choose, when only arguments the task does not say were lacking."""

    code = "no_plan"

    def __init__(
        self, message: str, candidates: list[dict[str, str]] | None = None, *, missing: Missing | None = None
    ) -> None:
        super().__init__(message)
        self.candidates = candidates or []
        self.missing = missing


class PlannerUnavailable(AgentifyError):
    code = "planner_unavailable"


class PlannerError(AgentifyError):
    code = "planner_error"


class InvalidPlan(AgentifyError):
    code = "invalid_plan"


class BackendUnavailable(AgentifyError):
    code = "backend_unavailable"


class NeedsAuth(BackendUnavailable):
    """The caller must authorize a backend as themselves first (`auth.perPrincipal`) and their client cannot open
    a URL for them: the message holds the URL to open."""

    code = "needs_auth"


class BackendError(AgentifyError):
    code = "backend_error"


class TaskTimeout(AgentifyError):
    code = "timeout"


class TaskCancelled(AgentifyError):
    code = "cancelled"


class Denied(AgentifyError):
    code = "denied"


class Declined(Denied):
    """The user said no: an answer, not a failure (logged at INFO). `missing`: the arguments the user was asked
    for, when that was the question (the client's model may call again with them)."""

    def __init__(self, message: str, *, missing: Missing | None = None) -> None:
        super().__init__(message)
        self.missing = missing


class RateLimited(AgentifyError):
    """Over a rate limit of `server.limits`: the call was not run; `retry_after_seconds` says when it may pass."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after_seconds: float) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Forbidden(AgentifyError):
    """`server.access` does not let the principal use the item: refused before anything ran."""

    code = "forbidden"


class ToolChanged(AgentifyError):
    """A backend tool withheld by `pinning: enforce`: it changed since it was pinned, was added after the
    backend's first listing, or its description is suspect. Nothing was run; a person approves it with
    `agentify pins approve`."""

    code = "tool_changed"


class InternalError(AgentifyError):
    code = "internal_error"


ERROR_CODES: tuple[str, ...] = tuple(
    cls.code
    for cls in (
        InvalidInput,
        NoPlan,
        PlannerUnavailable,
        PlannerError,
        InvalidPlan,
        BackendUnavailable,
        NeedsAuth,
        BackendError,
        TaskTimeout,
        TaskCancelled,
        Denied,
        RateLimited,
        Forbidden,
        ToolChanged,
        InternalError,
    )
)
