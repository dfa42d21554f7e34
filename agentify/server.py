"""The gateway's MCP server: tool definitions and thin handlers over the task runner.

Nothing here plans, spawns or formats beyond turning MCP requests into `TaskRunner`
calls and outcomes into results (`results.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from agentify import __version__
from agentify.app import Gateway, open_gateway
from agentify.client_requests import SessionConfirmer, SessionSampler
from agentify.config import Config, ConfigSources
from agentify.errors import AgentifyError, InvalidInput
from agentify.logging import LogSetup
from agentify.results import error_result, outcome_result, plan_result

_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What to do, in plain words: 'read README.md', 'run the login tests', "
            "'open localhost:3000/login and show me the page'.",
        },
        "context": {
            "type": ["object", "null"],
            "description": "Where the user is in the IDE, so relative paths resolve.",
            "properties": {
                "activeDocumentURI": {"type": ["string", "null"], "description": "file:// URI of the open document"},
                "currentWorkingDirectory": {"type": ["string", "null"], "description": "the workspace folder"},
                "selectionText": {"type": ["string", "null"], "description": "the selected text, if any"},
            },
        },
    },
    "required": ["query"],
}

TOOLS = [
    types.Tool(
        name="orchestrate_task",
        description="Do one task with the right tool of the configured MCP servers (files, tests, browser). "
        "A planner picks exactly one tool on one backend, calls it and returns that tool's result. "
        "Pass the workspace folder as context.currentWorkingDirectory so relative paths resolve.",
        input_schema=_TASK_SCHEMA,
        annotations=types.ToolAnnotations(title="Run a task on the best backend tool", open_world_hint=True),
    ),
    types.Tool(
        name="plan_task",
        description="Show which backend tool and arguments orchestrate_task would use for a task, without running it.",
        input_schema=_TASK_SCHEMA,
        annotations=types.ToolAnnotations(title="Plan a task (dry run)", read_only_hint=True),
    ),
    types.Tool(
        name="list_backends",
        description="List the configured backend MCP servers: state, last error and tool names, "
        "and which planner is in use.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(title="List backends", read_only_hint=True),
    ),
]


def build_server(
    sources: ConfigSources,
    config: Config,
    logs: LogSetup,
    on_closed: Callable[[], None] | None = None,
    *,
    trust_init_options: bool = True,
) -> Server[Gateway]:
    """`trust_init_options`: over stdio the client started agentify, so its `initializationOptions` are
    its own config; over HTTP any client can connect, and they may change nothing but the log level."""

    @asynccontextmanager
    async def lifespan(_: Server[Gateway]) -> AsyncIterator[Gateway]:
        try:
            async with open_gateway(sources, config, logs) as gateway:
                yield gateway
        finally:
            if on_closed is not None:
                on_closed()

    server: Server[Gateway] = Server(
        "agentify",
        version=__version__,
        instructions="agentify routes a task to the right tool on its backend MCP servers. "
        "Call orchestrate_task with the task in plain words.",
        lifespan=lifespan,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )
    # No OpenTelemetry exporter is configured by agentify: drop the SDK's per-message span middleware.
    server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    server.middleware.append(_initialization_options_reader(trusted=trust_init_options))
    return server


def _initialization_options_reader(*, trusted: bool) -> Callable[..., Any]:
    async def read(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """The SDK drops `initializationOptions`; read them from the raw `initialize` params."""
        if ctx.method == "initialize" and ctx.params:
            options = ctx.params.get("initializationOptions")
            if isinstance(options, dict) and options:
                ctx.lifespan_context.apply_init_options(options, trusted=trusted)
        return await call_next(ctx)

    return read


async def _list_tools(
    ctx: ServerRequestContext[Gateway], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def _call_tool(ctx: ServerRequestContext[Gateway], params: types.CallToolRequestParams) -> types.CallToolResult:
    gateway = ctx.lifespan_context
    arguments = params.arguments or {}
    if params.name == "list_backends":
        return _backends_result(gateway, sampling_available=SessionSampler.offered_by(ctx) is not None)
    if params.name not in ("orchestrate_task", "plan_task"):
        unknown = InvalidInput(f"unknown tool {params.name!r}; use orchestrate_task, plan_task or list_backends")
        return error_result(unknown, gateway.logs.redactor)
    steps = 0

    async def progress(message: str) -> None:
        nonlocal steps
        steps += 1
        await ctx.session.report_progress(steps, None, message)

    execute = params.name == "orchestrate_task"
    try:
        outcome = await gateway.runner.run(
            arguments,
            execute=execute,
            progress=progress,
            sampler=SessionSampler.offered_by(ctx),
            confirmer=SessionConfirmer.offered_by(ctx),
        )
    except AgentifyError as exc:  # TaskRunner.run turns every failure, bugs included, into one
        return error_result(exc, gateway.logs.redactor)
    return outcome_result(outcome, gateway.credentials) if execute else plan_result(outcome, gateway.credentials)


def _backends_result(gateway: Gateway, sampling_available: bool) -> types.CallToolResult:
    choice = gateway.planners.describe(sampling_available=sampling_available)
    statuses = gateway.manager.statuses()
    lines = [f"planner: {choice.reason}"]
    for status in statuses:
        line = f"- {status.id}: {status.state.value}" + (f" ({status.url})" if status.url else "")
        line += f", {len(status.tools)} tools"
        if status.tools:
            line += ": " + ", ".join(status.tools)
        if status.last_error:
            line += f" (last error: {status.last_error})"
        lines.append(line)
    if not statuses:
        lines.append("no backends are configured: add some to the config file (see backends.example.json)")
    structured = {
        "planner": {"name": choice.name, "reason": choice.reason},
        "backends": [
            {
                "id": s.id,
                "state": s.state.value,
                "pid": s.pid,
                "url": s.url,
                "start": s.start,
                "restarts": s.restarts,
                "lastError": s.last_error,
                "tools": list(s.tools),
            }
            for s in statuses
        ],
    }
    text = gateway.logs.redactor.text("\n".join(lines))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=gateway.logs.redactor.data(structured),
    )
