"""MCP results built from task outcomes and errors: the one place a failure becomes `isError`."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from agentify.errors import AgentifyError, Declined, NoPlan, RateLimited
from agentify.gateway.services import GatewayStatus
from agentify.gateway.tasks import TaskOutcome
from agentify.planner.retrieval import Ranked
from agentify.security.redact import Redactor


def outcome_result(outcome: TaskOutcome, credentials: Redactor) -> types.CallToolResult:
    """The backend's own result plus `_meta["agentify/plan"]`, unchanged but for credentials it echoed."""
    backend = outcome.result
    assert backend is not None, "an executed task has a backend result"
    meta = credentials.data(dict(backend.meta or {}), patterns=False)
    meta["agentify/plan"] = credentials.data(outcome.plan_meta(), patterns=False)
    content = [
        block.model_copy(update={"text": credentials.text(block.text, patterns=False)})
        if isinstance(block, types.TextContent)
        else block
        for block in backend.content
    ]
    return types.CallToolResult(
        content=content,
        structured_content=credentials.data(backend.structured_content, patterns=False),
        is_error=backend.is_error,
        _meta=meta,
    )


def plan_result(outcome: TaskOutcome, credentials: Redactor) -> types.CallToolResult:
    plan = outcome.plan
    meta = credentials.data(outcome.plan_meta(), patterns=False)
    confirmation = {"required": outcome.confirmation is not None, "reason": outcome.confirmation}
    structured = meta | {"reasoning": plan.reasoning, "confirmation": confirmation}
    arguments = json.dumps(meta["arguments"])
    text = f"Plan: call {plan.backend}.{plan.tool} with {arguments} (planner: {plan.planner}; not run)"
    if outcome.confirmation:
        text += f". Running it would first ask for your confirmation: {outcome.confirmation}."
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        _meta={"agentify/plan": meta},
    )


LIMIT = 8000
"""Characters of an error's text kept after masking (it may quote a backend's stderr)."""


def error_result(error: AgentifyError, redactor: Redactor) -> types.CallToolResult:
    """The error as an isError result; redacted, since messages quote backend stderr and errors."""
    meta: dict[str, Any] = {"code": error.code, "traceId": error.trace_id}
    if isinstance(error, RateLimited):
        meta["retryAfterSeconds"] = error.retry_after_seconds
    if isinstance(error, NoPlan) and error.candidates:
        meta["candidates"] = redactor.data(error.candidates)
    if isinstance(error, NoPlan | Declined) and error.missing is not None:
        meta |= redactor.data(error.missing.meta())
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=redactor.bounded(f"agentify {error.code}: {error.message}", 8000))
        ],
        is_error=True,
        _meta={"agentify/error": meta},
    )


def search_entry(found: Ranked) -> dict[str, Any]:
    """One tool as `search_tools` shows it (also what `agentify eval --mode search` counts tokens of)."""
    tool = found.tool
    entry: dict[str, Any] = {
        "name": tool.name,
        "backend": tool.backend,
        "tool": tool.tool.name,
        "description": tool.tool.description or tool.tool.title or "",
        "inputSchema": tool.input_schema,
    }
    if tool.tool.annotations is not None:
        entry["annotations"] = tool.tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
    return entry


def search_result(query: str, found: list[Ranked], redactor: Redactor) -> types.CallToolResult:
    """The tools in text (what every model reads) and in `structuredContent.tools`."""
    tools = [search_entry(r) for r in found]
    if tools:
        text = (
            f"{len(tools)} tools for {query!r}, best first. Run one with call_tool "
            '{"name": <name>, "arguments": {...}} (arguments must match its inputSchema):\n'
            + "\n".join(json.dumps(t, separators=(",", ":")) for t in tools)
        )
    else:
        text = (
            f"no tool matches {query!r}: use other words (what the tool does: read, write, click, run...), "
            "or call list_backends to see every backend and its tools"
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=redactor.text(text))],
        structured_content=redactor.data({"tools": tools}),
    )


def backends_result(shown: GatewayStatus, redactor: Redactor) -> types.CallToolResult:
    """`list_backends`: the planner and every backend, as text and `structuredContent`, masked."""
    choice, statuses = shown.planner, shown.backends
    lines = [f"planner: {choice.reason}"]
    for status in statuses:
        line = f"- {status.id}: {status.state.value}" + (f" ({status.url})" if status.url else "")
        line += f", {len(status.tools)} tools"
        if status.tools:
            line += ": " + ", ".join(status.tools)
        if status.last_error:
            line += f" (last error: {status.last_error})"
        if status.server:
            line += f" [server: {status.server}]"
        lines.append(line)
        lines.extend(f"  withheld {tool} (pinning: enforce): {why}" for tool, why in status.withheld)
        lines.extend(f"  flagged {tool} (pinning: warn, waits for approval): {why}" for tool, why in status.flagged)
    if not statuses:
        lines.append("no backends are configured: add some to the config file (see backends.example.json)")
    structured = {
        "planner": {"name": choice.name, "reason": choice.reason},
        "backends": [
            {
                "id": s.id,
                "state": s.state.value,
                "pid": s.pid,
                "extraPids": list(s.extra_pids),
                "url": s.url,
                "start": s.start,
                "restarts": s.restarts,
                "lastError": s.last_error,
                "tools": list(s.tools),
                "server": s.server,
            }
            | s.pins_dict()
            for s in statuses
        ],
    }
    text = redactor.text("\n".join(lines))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=redactor.data(structured),
    )
