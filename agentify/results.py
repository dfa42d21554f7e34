"""MCP results built from task outcomes and errors: the one place a failure becomes `isError`."""

from __future__ import annotations

import mcp_types as types

from agentify.errors import AgentifyError
from agentify.tasks import TaskOutcome


def outcome_result(outcome: TaskOutcome) -> types.CallToolResult:
    """The backend's own result, unchanged, plus `_meta["agentify/plan"]`."""
    backend = outcome.result
    assert backend is not None, "an executed task has a backend result"
    meta = dict(backend.meta or {})
    meta["agentify/plan"] = outcome.plan_meta()
    return types.CallToolResult(
        content=backend.content,
        structured_content=backend.structured_content,
        is_error=backend.is_error,
        _meta=meta,
    )


def plan_result(outcome: TaskOutcome) -> types.CallToolResult:
    plan = outcome.plan
    structured = outcome.plan_meta() | {"reasoning": plan.reasoning}
    text = f"Plan: call {plan.backend}.{plan.tool} with {plan.arguments} (planner: {plan.planner}; not executed)"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        _meta={"agentify/plan": outcome.plan_meta()},
    )


def error_result(error: AgentifyError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"agentify {error.code}: {error.message}")],
        is_error=True,
        _meta={"agentify/error": {"code": error.code, "traceId": error.trace_id}},
    )
