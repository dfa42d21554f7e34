"""The MCP adapter: tools from the catalog, tool calls to `Runs`, list_changed on project edits.

A new `ServerSession` is built for every inbound message, but on a stdio (handshake-era)
connection they all share one connection and its outbound channel. A middleware remembers the
latest session, which is how the project watcher sends `notifications/tools/list_changed` outside
any request.
"""

from __future__ import annotations

import hashlib
import itertools
from contextlib import suppress
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from mcp.server import NotificationOptions, Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from agentify import __version__
from agentify.arbigent.catalog import IDS_TOOL, LIST_TOOL, Catalog, build_catalog
from agentify.arbigent.errors import ProjectError, ToolCallError
from agentify.arbigent.project import parse_project
from agentify.arbigent.runs import Progress, Runs, Selection
from agentify.redact import Redactor

SERVER_NAME = "agentify-arbigent"
POLL_SECONDS = 1.0

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_RUN_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["passed", "failed", "empty", "timeout"]},
        "exitCode": {"type": ["integer", "null"]},
        "scenarios": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "success": {"type": "boolean"}},
                "required": ["id", "success"],
            },
        },
        "resultFile": {"type": ["string", "null"]},
        "reportFile": {"type": ["string", "null"]},
        "durationMs": {"type": "integer"},
    },
    "required": ["status", "exitCode", "scenarios", "resultFile", "reportFile", "durationMs"],
}
_RUNS_TESTS = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


class ArbigentServer:
    """Serves one project's tools over one MCP connection."""

    def __init__(self, *, catalog: Catalog, runs: Runs, redactor: Redactor, poll_seconds: float = POLL_SECONDS) -> None:
        self._catalog = catalog
        self._runs = runs
        self._redactor = redactor
        self._poll_seconds = poll_seconds
        self._session: ServerSession | None = None
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions=(
                "Runs the Arbigent AI end-to-end tests of one project. Call run-arbigent-test-<tag> to run the "
                "scenarios with a tag, run-arbigent-test-all for the whole suite, run-arbigent-scenarios for "
                "chosen scenario ids, and list-arbigent-scenarios to see what exists."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.server.middleware.append(self._remember_session)

    async def serve(
        self, read_stream: ReadStream[SessionMessage | Exception], write_stream: WriteStream[SessionMessage]
    ) -> None:
        """Serves until the client closes the connection; watches the project file meanwhile."""
        options = self.server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch_project)
            await self.server.run(read_stream, write_stream, options)
            tg.cancel_scope.cancel()

    async def _remember_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        self._session = ctx.session
        return await call_next(ctx)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools_for(self._catalog))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        catalog = self._catalog
        try:
            if params.name == LIST_TOOL:
                return _listing(catalog)
            selection = selection_for(catalog, params.name, params.arguments or {})
            report = await self._runs.run(selection, _progress_reporter(ctx))
        except ToolCallError as exc:
            logger.warning("{} failed: {}", params.name, exc)
            return _error(self._redactor.text(str(exc), patterns=False))
        except Exception:  # the top of a tool call: log the traceback once, answer with isError
            logger.exception("{} failed unexpectedly", params.name)
            return _error(f"internal error in the arbigent runner while running {params.name}; see the runner's log")
        return types.CallToolResult(
            content=[types.TextContent(text=self._redactor.text(report.text(), patterns=False))],
            structured_content=report.structured(),
            is_error=report.is_error,
        )

    async def _watch_project(self) -> None:
        """Polls the project file; a usable change replaces the tools, a broken one is only logged."""
        path = self._catalog.project.path
        last_digest: str | None = None
        unreadable = False
        while True:
            await anyio.sleep(self._poll_seconds)
            try:
                content = await anyio.Path(path).read_bytes()
            except OSError as exc:
                if not unreadable:
                    logger.warning(
                        "project file {} cannot be read ({}); keeping the last good tools", path, exc.strerror
                    )
                unreadable = True
                continue
            unreadable = False
            digest = hashlib.sha256(content).hexdigest()
            if digest != last_digest:
                last_digest = digest
                await self._reload(content)

    async def _reload(self, content: bytes) -> None:
        path = self._catalog.project.path
        try:
            project = parse_project(content.decode("utf-8", errors="replace"), path)
        except ProjectError as exc:
            logger.warning("{}; keeping the last good tools", exc)
            return
        catalog = build_catalog(project)
        changed = tools_for(catalog) != tools_for(self._catalog)
        self._catalog = catalog
        if not changed:
            logger.debug("project file {} read; the tools stay the same", path)
            return
        logger.info("project file {} changed; now serving {} tools", path, len(tools_for(catalog)))
        session = self._session
        if session is not None:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await session.send_tool_list_changed()


def tools_for(catalog: Catalog) -> list[types.Tool]:
    tools = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=_NO_ARGUMENTS,
            output_schema=_RUN_OUTPUT,
            annotations=_RUNS_TESTS,
        )
        for tool in catalog.run_tools
    ]
    ids = catalog.project.ids
    items: dict[str, Any] = {"type": "string", "enum": ids} if ids else {"type": "string"}
    tools.append(
        types.Tool(
            name=IDS_TOOL,
            description=(
                "Run chosen Arbigent scenarios by id (`arbigent run --scenario-ids=...`); each runs after its "
                f"dependency chain. Scenario ids: {', '.join(ids) or 'none'}. Returns the same result as the "
                "run-arbigent-test tools."
            ),
            input_schema={
                "type": "object",
                "properties": {"scenarioIds": {"type": "array", "items": items, "minItems": 1}},
                "required": ["scenarioIds"],
                "additionalProperties": False,
            },
            output_schema=_RUN_OUTPUT,
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
            input_schema=_NO_ARGUMENTS,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
    )
    return tools


def selection_for(catalog: Catalog, name: str, arguments: dict[str, Any]) -> Selection:
    """The selection a tool call asks for.

    Raises:
        ToolCallError: unknown tool, or scenario ids missing, malformed or unknown.
    """
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
        return Selection(ids=tuple(dict.fromkeys(ids)))
    tool = catalog.find(name)
    if tool is None:
        names = ", ".join(t.name for t in tools_for(catalog))
        raise ToolCallError(f"unknown tool '{name}' (the project file may have changed); tools now: {names}")
    return Selection(tag=tool.tag)


def _listing(catalog: Catalog) -> types.CallToolResult:
    project = catalog.project
    scenarios = [
        {"id": s.id, "goal": s.goal, "tags": list(s.tags), "dependency": s.dependency, "chain": project.chain(s.id)}
        for s in project.scenarios
    ]
    tools = [{"name": t.name, "tag": t.tag, "selects": list(t.selects)} for t in catalog.run_tools]
    lines = [f"Project: {project.path} ({len(scenarios)} scenarios)", "Scenarios:"]
    for s in project.scenarios:
        after = f" (after {s.dependency})" if s.dependency else ""
        tags = f" [tags: {', '.join(s.tags)}]" if s.tags else ""
        lines.append(f"  {s.id}{after}{tags}: {s.goal}")
    lines.append("Tools:")
    lines += [f"  {t.name} runs: {', '.join(t.selects) or 'nothing'}" for t in catalog.run_tools]
    if catalog.unselectable_tags:
        lines.append(f"Tags containing ',' (the CLI cannot select them): {', '.join(catalog.unselectable_tags)}")
    structured = {
        "projectFile": str(project.path),
        "scenarios": scenarios,
        "tools": tools,
        "unselectableTags": list(catalog.unselectable_tags),
    }
    return types.CallToolResult(content=[types.TextContent(text="\n".join(lines))], structured_content=structured)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _progress_reporter(ctx: ServerRequestContext[Any, Any]) -> Progress:
    """Progress for this request: a no-op unless the client sent a progress token."""
    counter = itertools.count(1)

    async def report(message: str) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await ctx.session.report_progress(next(counter), None, message)

    return report
