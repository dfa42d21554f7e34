"""Middleware: every operation a principal asks for, as it ends, handed to the audit and the metrics
(`team.operations`).

Operations are `tools/call` (of any gateway tool: `operation` is the tool called, `target` the backend
tool it reached), `resources/read` (the URI), `prompts/get` (the prompt), `completion/complete` (the
prompt or template completed). A 2026-07-28 round that asks the client something is no line: the
operation goes on in the client's next round, which is. Runs inside the SDK's server span (`traceId`)
and as the request's principal.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import get_current_span
from pydantic import ValidationError

from agentify.team.operations import NO_ARGUMENTS, Draft, Operation, OperationSink, decision_of, drafting
from agentify.team.principal import LOCAL, current_principal

AUDITED = ("tools/call", "resources/read", "prompts/get", "completion/complete")
GATEWAY = "agentify"
"""The backend label of the gateway's own tools that reach no backend (list_backends, search_tools, plan_task)."""
ROUTING = ("call_tool", "orchestrate_task")
"""The gateway's tools that reach a backend tool."""
_NAME_CHARS = 200
_ERROR_NAMES = {
    types.INVALID_PARAMS: "invalid_params",
    types.INVALID_REQUEST: "invalid_request",
    types.METHOD_NOT_FOUND: "method_not_found",
    types.INTERNAL_ERROR: "internal_error",
    -32002: "resource_not_found",
}


def recording(sinks: Sequence[OperationSink], gateway_tools: Collection[str]) -> Any:
    """The middleware; `gateway_tools` are the gateway's own tool names (the rest reach a backend)."""

    async def record(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method not in AUDITED:
            return await call_next(ctx)
        params: Mapping[str, Any] = ctx.params if isinstance(ctx.params, Mapping) else {}
        draft = Draft(operation=_operation(ctx.method, params), target=_asked(ctx.method, params, gateway_tools))
        started, wall = time.perf_counter(), time.time()

        def done(outcome: str) -> None:
            backend, tool = draft.backend, draft.tool
            if backend is None and draft.operation in gateway_tools and draft.operation not in ROUTING:
                backend, tool = GATEWAY, draft.operation
            operation = Operation(
                time=wall,
                method=ctx.method,
                principal=current_principal() or LOCAL,
                client=_client(ctx),
                operation=draft.operation,
                target=draft.target,
                arguments=_arguments(ctx.method, params),
                decision=decision_of(draft, outcome),
                outcome=outcome,
                duration_ms=(time.perf_counter() - started) * 1000,
                trace_id=_trace_id(),
                backend=backend,
                tool=tool,
            )
            for sink in sinks:
                sink(operation)

        with drafting(draft):
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                done(draft.code or _ERROR_NAMES.get(exc.error.code, "mcp_error"))
                raise
            except ValidationError:
                done("invalid_params")
                raise
            except anyio.get_cancelled_exc_class():
                done("cancelled")
                raise
            except Exception:
                done("internal_error")
                raise
        if not _asks_client(result):
            done(_outcome(result, draft) if ctx.method == "tools/call" else "ok")
        return result

    return record


def _operation(method: str, params: Mapping[str, Any]) -> str:
    name = params.get("name")
    return str(name)[:_NAME_CHARS] if method == "tools/call" and name is not None else method


def _asked(method: str, params: Mapping[str, Any], gateway_tools: Collection[str]) -> str | None:
    """What the principal asked for, before anything resolved it (the runner names the backend tool reached)."""
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments")
        if name == "call_tool" and isinstance(arguments, Mapping) and isinstance(arguments.get("name"), str):
            return str(arguments["name"])[:_NAME_CHARS]
        return None if name in gateway_tools or not isinstance(name, str) else name[:_NAME_CHARS]
    if method == "resources/read":
        return str(params.get("uri", ""))
    if method == "prompts/get":
        return str(params.get("name", ""))[:_NAME_CHARS]
    ref = params.get("ref")
    if isinstance(ref, Mapping):
        return str(ref.get("name") or ref.get("uri") or "")
    return None


def _arguments(method: str, params: Mapping[str, Any]) -> Any:
    if method in ("tools/call", "prompts/get"):
        return params.get("arguments") or {}
    if method == "completion/complete":
        return {key: params[key] for key in ("argument", "context") if key in params}
    return NO_ARGUMENTS


def _client(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The client program as it names itself (`clientInfo`), in either era."""
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return f"{info.name}/{info.version}"[:_NAME_CHARS]


def _trace_id() -> str | None:
    context = get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _asks_client(result: HandlerResult) -> bool:
    if isinstance(result, types.InputRequiredResult):
        return True
    return isinstance(result, dict) and result.get("resultType") == "input_required"


def _outcome(result: HandlerResult, draft: Draft) -> str:
    """`ok`; `tool_error` for the backend's own error result; else the code of agentify's error. A backend's
    result is never read for a code (its `_meta` is its own to fill)."""
    if isinstance(result, types.CallToolResult):
        failed, meta = bool(result.is_error), result.meta or {}
    elif isinstance(result, dict):
        failed, meta = bool(result.get("isError")), result.get("_meta") or {}
    else:
        return "ok"
    if not failed:
        return "ok"
    if draft.answered:
        return "tool_error"
    error = meta.get("agentify/error") if isinstance(meta, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return str(code)[:40] if code else "tool_error"
