"""The gateway's MCP server: tool definitions and thin handlers over the task runner.

Nothing here plans, spawns or formats beyond turning MCP requests into `TaskRunner`
calls and outcomes into results (`results.py`). It sees the gateway's services through
`McpServices`, the part of them it uses, and keeps each client's roots (`roots.RootsBook`) and log level
(`logs.LogRelay`, which also relays the backends' log messages).
Every request runs as its principal (`telemetry.principal`: from its access token over HTTP) and,
over HTTP, counts as in flight for the drain (`replica.Replica`); every `tools/call` is charged to
its principal's rate limit first.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

import mcp_types as types
from loguru import logger
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

from agentify import __version__
from agentify._common.background import background
from agentify._common.schemas import tool_schema
from agentify.backends.logs import LogListener
from agentify.backends.offers import Change, ChangeListener
from agentify.backends.state import BackendStatus
from agentify.config import Config
from agentify.errors import AgentifyError, InvalidInput
from agentify.gateway.backend_questions import BackendQuestionRelay
from agentify.gateway.exposed import search_description
from agentify.gateway.inputs import CallInput, NoInput, SearchInput, validate_input
from agentify.gateway.offers import Offerings
from agentify.gateway.policy import AskingClient
from agentify.gateway.services import TaskServices
from agentify.gateway.visible import visible_backends
from agentify.mcp_server.client_requests import Exchange, Questions
from agentify.mcp_server.direct import direct_tools, follow_tools, heard, listed
from agentify.mcp_server.logs import LogRelay, protocol_level
from agentify.mcp_server.offers import ChangeRelay, capabilities_writer, connection_keeper, offer_handlers
from agentify.mcp_server.operations import recording
from agentify.mcp_server.param_headers import ParamHeaderServer
from agentify.mcp_server.remote_cancels import cancellable
from agentify.mcp_server.results import backends_result, error_result, outcome_result, plan_result, search_result
from agentify.mcp_server.roots import ClientRoots, RootsBook
from agentify.planner import TaskInput
from agentify.security.display import escaped
from agentify.security.redact import Redactor
from agentify.team.access import AccessGate
from agentify.team.bearer import who_of
from agentify.team.cancellations import CallBook
from agentify.team.drain import BackendReadiness, Replica
from agentify.team.limits import Limiter
from agentify.team.operations import OperationSink
from agentify.team.principal import ANONYMOUS, LOCAL, acting_for, current_principal, verified_token

_TASK_SCHEMA = tool_schema(TaskInput)

ORCHESTRATE_TOOLS = [
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
        input_schema=tool_schema(NoInput),
        annotations=types.ToolAnnotations(title="List backends", read_only_hint=True),
    ),
]
SEARCH_TOOLS = [
    types.Tool(
        name="search_tools",
        description="Find the tools of the configured MCP servers (files, tests, browser) that fit what you want "
        "to do. Returns the best matches with their names, descriptions and input schemas; run one with call_tool.",
        input_schema=tool_schema(SearchInput),
        annotations=types.ToolAnnotations(title="Search the backend tools", read_only_hint=True),
    ),
    types.Tool(
        name="call_tool",
        description="Run one backend tool found with search_tools: give its name ('<backend>__<tool>') and "
        "arguments matching its input schema. Returns that tool's result. Destructive tools ask the user first.",
        input_schema=tool_schema(CallInput),
        annotations=types.ToolAnnotations(title="Call a backend tool", open_world_hint=True),
    ),
]
TOOLS = ORCHESTRATE_TOOLS + SEARCH_TOOLS


def exposed_tools(config: Config, backends: Sequence[BackendStatus] = ()) -> list[types.Tool]:
    """The gateway's tools that config `expose` turns on, in a stable order; with `backends`, search_tools
    says what is behind it (`exposed.search_description`)."""
    search = SEARCH_TOOLS
    if backends:
        described = search_description([(b.id, b.description, b.tools) for b in backends if b.enabled])
        search = [SEARCH_TOOLS[0].model_copy(update={"description": described}), *SEARCH_TOOLS[1:]]
    return [
        *(ORCHESTRATE_TOOLS if "orchestrate" in config.expose else []),
        *(search if "search" in config.expose else []),
    ]


class McpServices(TaskServices, Protocol):
    """What the MCP server uses of the gateway's services (`gateway.services.Services`)."""

    @property
    def redactor(self) -> Redactor: ...

    @property
    def offerings(self) -> Offerings: ...

    @property
    def limiter(self) -> Limiter: ...

    @property
    def access(self) -> AccessGate: ...

    def forward_roots(self, roots: list[types.Root]) -> None: ...

    def on_change(self, listener: ChangeListener) -> Callable[[], None]: ...

    def on_log(self, listener: LogListener) -> Callable[[], None]: ...

    def set_log_level(self, level: types.LoggingLevel) -> None: ...

    async def backends_changed(self) -> None: ...


@dataclass(frozen=True)
class McpContext:
    """The server's lifespan context: the services, the roots of each client it serves, and the relays of the
    backends' changes and log messages to its clients."""

    services: McpServices
    roots: RootsBook
    relay: ChangeRelay
    logs: LogRelay

    @property
    def offerings(self) -> Offerings:
        return self.services.offerings

    @property
    def redactor(self) -> Redactor:
        return self.services.redactor


@dataclass(frozen=True)
class Clients:
    """Who the server serves: over stdio one client, the user who started agentify (no principal); over
    HTTP many, each request as the principal of its access token (`ANONYMOUS` without one: `--no-auth`),
    and a `replica` that drains."""

    one: bool = True
    replica: Replica | None = None
    cancels: CallBook | None = None
    """With `server.redis`: the book of calls that a cancel through another replica can end."""


OpenServices = Callable[[], AbstractAsyncContextManager[McpServices]]
"""Opens the gateway's services for as long as the server runs (the composition root's choice)."""


def build_server(
    open_services: OpenServices,
    on_closed: Callable[[], None] | None = None,
    *,
    trust_init_options: bool = True,
    questions: Questions | None = None,
    clients: Clients | None = None,
    operations: Sequence[OperationSink] = (),
) -> Server[McpContext]:
    """`trust_init_options`: over stdio the client started agentify, so its `initializationOptions` are
    its own config; over HTTP any client can connect, and they change nothing.
    `questions`: how long the client's answers are awaited, and which were used (`Questions`).
    `clients`: one (stdio, the default) or many (HTTP). `operations` hear every operation a principal asked
    for as it ends (the audit, the metrics: `mcp_server/operations.py`)."""
    questions = questions or Questions()
    clients = clients or Clients()

    @asynccontextmanager
    async def lifespan(running: Server[McpContext]) -> AsyncIterator[McpContext]:
        try:
            async with open_services() as services, background() as tg:
                if isinstance(running, ParamHeaderServer):
                    running.current = lambda: services.settings.current
                if clients.replica is not None:
                    clients.replica.statuses = lambda: [
                        BackendReadiness(s.id, s.state.value, s.enabled and s.start == "eager")
                        for s in services.status().backends
                    ]
                relay = ChangeRelay(services.offerings)
                own_level = None if clients.one else protocol_level(services.settings.current.log_level)
                logs = LogRelay(services.redactor, services.set_log_level, own_level)
                stop_hearing = services.on_change(heard(relay))
                stop_logs = services.on_log(logs.heard)
                services.settings.reloaded.append(_telling(relay))
                services.access.listeners.append(_access_changed(relay))
                await tg.start(relay.run)
                await tg.start(logs.run)
                tg.start_soon(follow_tools, services, relay)
                try:
                    roots = RootsBook(services.forward_roots, one_client=clients.one)
                    yield McpContext(services, roots, relay, logs)
                finally:
                    stop_hearing()
                    stop_logs()
                    relay.close()
                    logs.close()
                    tg.cancel_scope.cancel()  # a delivery stuck on a client that stopped reading ends here
        finally:
            if on_closed is not None:
                on_closed()

    with warnings.catch_warnings():
        # Roots are deprecated in the 2026-07-28 protocol, but 2025-11-25 IDE clients offer them.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server: Server[McpContext] = _server(lifespan, questions)
    # The SDK's OpenTelemetry middleware stays first of the SDK's: a server span per request, continuing
    # the client's `_meta.traceparent`; the task's spans nest under it. Over HTTP the principal comes
    # before it, so that span (`enduser.id`) and everything after run as the principal.
    if not clients.one:
        server.middleware.insert(0, _per_request(clients.replica))
    if clients.cancels is not None:
        server.middleware.insert(1, cancellable(clients.cancels))
    server.middleware.append(_initialization_options_reader(trusted=trust_init_options))
    server.middleware.append(capabilities_writer(lambda ctx: ctx.lifespan_context.offerings))
    server.middleware.append(connection_keeper(lambda ctx: ctx.lifespan_context.relay))
    server.middleware.append(questions.boundary(server.name))
    if operations:
        server.middleware.append(recording(operations, {tool.name for tool in TOOLS}))
    return server


def _access_changed(relay: ChangeRelay) -> Callable[[], None]:
    """New `server.access` rules or policy: every list a client was shown may have changed."""

    def tell() -> None:
        for kind in ("tools", "resources", "prompts"):
            relay.changed(Change(backend="agentify", kind=kind))

    return tell


def _telling(relay: ChangeRelay) -> Callable[[], Awaitable[None]]:
    """After the config file changed the backends, the clients are told the tools changed."""

    async def tell() -> None:
        relay.changed(Change(backend="agentify", kind="tools"))

    return tell


def _server(lifespan: Any, questions: Questions) -> Server[McpContext]:
    async def call_tool(
        ctx: ServerRequestContext[McpContext], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await _call_tool(ctx, params, Exchange(ctx, params, questions), questions.seconds)

    return ParamHeaderServer(
        "agentify",
        version=__version__,
        instructions="agentify routes a task to the right tool on its backend MCP servers. "
        "Call orchestrate_task with the task in plain words, or find a tool with search_tools and run it "
        "with call_tool to choose the tool yourself.",
        lifespan=lifespan,
        on_list_tools=_list_tools,
        on_call_tool=call_tool,
        on_roots_list_changed=_roots_changed,
        on_set_logging_level=_set_log_level,
        **offer_handlers(lambda ctx: ctx.lifespan_context),
    )


def _per_request(replica: Replica | None) -> Callable[..., Any]:
    async def run_as_principal(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        access = ctx.lifespan_context.services.settings.current.server.access
        who = who_of(ctx.request, ANONYMOUS, access.groups_claim if access is not None else "groups")
        with acting_for(who.name, groups=who.groups, scopes=who.scopes, token=verified_token(ctx.request)):
            if replica is None or ctx.request_id is None:  # a notification is no work to drain
                return await call_next(ctx)
            async with replica.handling():
                return await call_next(ctx)

    return run_as_principal


def _initialization_options_reader(*, trusted: bool) -> Callable[..., Any]:
    async def read(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """The SDK drops `initializationOptions`; read them from the raw `initialize` params. Over HTTP
        they change nothing: the client is not the user who started agentify, and the log level is
        everyone's."""
        if ctx.method == "initialize" and ctx.params:
            options = ctx.params.get("initializationOptions")
            if isinstance(options, dict) and options and trusted:
                ctx.lifespan_context.services.settings.apply_init_options(options)
            elif isinstance(options, dict) and options:
                keys = ", ".join(escaped(str(key))[:80] for key in list(options)[:20])
                logger.warning("initializationOptions over HTTP change nothing; ignored: {}", keys)
        return await call_next(ctx)

    return read


async def _list_tools(
    ctx: ServerRequestContext[McpContext], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    services = ctx.lifespan_context.services
    config = services.settings.current
    direct = await direct_tools(services, [t.name for t in exposed_tools(config)])
    own = exposed_tools(config, services.status().backends)  # after direct_tools, which may wait for the backends
    return types.ListToolsResult(tools=own + listed(direct))


async def _call_tool(
    ctx: ServerRequestContext[McpContext],
    params: types.CallToolRequestParams,
    exchange: Exchange,
    questions_seconds: float,
) -> types.CallToolResult | types.InputRequiredResult:
    services = ctx.lifespan_context.services
    arguments = params.arguments or {}
    settings = services.settings.current
    exposed = [t.name for t in exposed_tools(settings)]
    name = params.name
    if name not in exposed and (tool := (await direct_tools(services, exposed, everyone=True)).find(name)) is not None:
        arguments, name = {"name": tool.name, "arguments": arguments}, "call_tool"  # `call_tool`'s path
    elif name not in exposed:
        try:
            services.runner.refuse_withheld(name)
        except AgentifyError as withheld:
            return error_result(withheld, services.redactor)
        offered = exposed + (["the backend tools that tools/list shows"] if "tools" in settings.expose else [])
        unknown = InvalidInput(f"unknown tool {params.name!r}; this gateway offers {', '.join(offered)}")
        return error_result(unknown, services.redactor)
    if (unsolicited := exchange.unsolicited_error()) is not None:
        return error_result(unsolicited, services.redactor)
    steps = 0

    async def report(message: str) -> None:
        nonlocal steps
        steps += 1
        # Relayed backend messages can carry what the backend knows: its env, its tokens.
        await ctx.session.report_progress(steps, None, services.redactor.text(message, patterns=False))

    # Without a progress token nothing would be sent: the task then neither words its steps nor asks the
    # backend for progress.
    progress = report if progress_token_from_params(ctx.params) is not None else None  # as the SDK reads it

    try:
        await services.limiter.charge_principal(current_principal() or LOCAL)
        if name == "list_backends":
            validate_input(NoInput, arguments, "{}")
            status = services.status(sampling_available=exchange.sampler() is not None)
            everyone = await services.runner.catalog(everyone=True) if services.runner.access().active else None
            if everyone is not None:
                status = replace(status, backends=visible_backends(services.runner.access(), status.backends, everyone))
            return backends_result(status, services.redactor)
        if name == "search_tools":
            request, found = await services.runner.search(arguments)
            return search_result(request.query, found, services.redactor)
        answerer = BackendQuestionRelay(
            exchange, questions_seconds, lambda text: services.redactor.text(text, patterns=False)
        )
        async with ctx.lifespan_context.logs.for_call(ctx) as logs:
            if name == "call_tool":
                outcome = await services.runner.call(
                    arguments, progress=progress, confirmer=exchange.confirmer(), answerer=answerer, logs=logs
                )
                return outcome_result(outcome, services.redactor)
            execute = name == "orchestrate_task"
            outcome = await services.runner.run(
                arguments,
                execute=execute,
                progress=progress,
                sampler=exchange.sampler(),
                confirmer=exchange.confirmer(),
                given=exchange.plan if execute else None,
                default_cwd=await _default_cwd(ctx.lifespan_context.roots.of(ctx.request), exchange, arguments),
                answerer=answerer,
                logs=logs,
            )
    except AskingClient as asking:  # 2026-07-28: the client answers and calls again
        if asking.plan is not None:  # a backend asked: the next round calls the same plan, not a new one
            exchange.keep_plan(asking.plan)
        return exchange.input_required(asking.trace_id)
    except AgentifyError as exc:  # TaskRunner turns every failure, bugs included, into one
        return error_result(exc, services.redactor)
    return outcome_result(outcome, services.redactor) if execute else plan_result(outcome, services.redactor)


async def _default_cwd(roots: ClientRoots, exchange: Exchange, arguments: dict[str, Any]) -> str | None:
    """The client's first root, for a task whose context names no working directory.

    Asked once and kept until the client says they changed.
    Raises AskingClient (2026-07-28: the roots come with the next round)."""
    context = arguments.get("context")
    if isinstance(context, dict) and context.get("currentWorkingDirectory"):
        return None
    if roots.known is None and exchange.offers_roots():
        try:
            roots.learn(await exchange.list_roots())
        except MCPError as exc:
            logger.info("the client offers roots but did not list them ({}); tasks run without them", exc)
            roots.learn([])
    return roots.working_directory()


async def _set_log_level(
    ctx: ServerRequestContext[McpContext], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """`logging/setLevel` (2025-11-25): the backends' log messages this client gets from now on."""
    ctx.lifespan_context.logs.set_level(ctx, params.level)
    return types.EmptyResult()


async def _roots_changed(ctx: ServerRequestContext[McpContext], params: types.NotificationParams | None) -> None:
    """`notifications/roots/list_changed`: ask again now where the client can be asked, else on the next task."""
    roots = ctx.lifespan_context.roots.of(ctx.request)
    roots.forget()
    if not ctx.session.can_send_request:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await ctx.session.list_roots()
    except MCPError as exc:
        logger.info("the client's roots changed but it did not list them ({}); asking on the next task", exc)
        return
    roots.learn(list(result.roots))
