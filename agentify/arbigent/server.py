"""The MCP adapter: tools from the catalog, tool calls to `Runs`, run files as resources, list_changed.

A new `ServerSession` is built for every inbound message, but on a stdio (handshake-era)
connection they all share one connection and its outbound channel. A middleware remembers the
latest session, which is how the project watcher sends `notifications/tools/list_changed` outside
any request.

The project file is polled: its path is resolved again at each poll, so re-pointing a symlink is
seen as well as editing the file it points to. Reading and parsing happen in a worker thread, so a
big project never stalls the event loop.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from loguru import logger
from mcp.server import NotificationOptions, Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from agentify import __version__
from agentify.arbigent.artifacts import ArtifactError, ArtifactStore, mime_type
from agentify.arbigent.catalog import LINT_TOOL, LIST_TOOL, ProjectTools, build_catalog
from agentify.arbigent.errors import ProjectError, ToolCallError
from agentify.arbigent.lint import lint_project
from agentify.arbigent.project import parse_project
from agentify.arbigent.results import RunReport
from agentify.arbigent.runs import Progress, Runs
from agentify.arbigent.tools import listing, refuse_unknown_keys, selection_for, tools_for
from agentify.arbigent.yamlfile import YamlFileError, read_text_file
from agentify.security.redact import Redactor

SERVER_NAME = "agentify-arbigent"
POLL_SECONDS = 1.0
RESOURCE_NOT_FOUND = -32002
RESOURCES_PAGE = 50
"""Resources per `resources/list` page: a run keeps up to a few hundred screenshots."""


class ArbigentServer:
    """Serves one project's tools over one MCP connection."""

    def __init__(
        self,
        *,
        catalog: ProjectTools,
        runs: Runs,
        redactor: Redactor,
        cli: str = "",
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        """`cli` says which arbigent the runs use; it is the server info's description, which clients
        such as the gateway's `doctor` and `list_backends` show."""
        self._catalog = catalog
        self._runs = runs
        self._redactor = redactor
        self._lint = "sort" in runs.config.cli.commands
        self._poll_seconds = poll_seconds
        self._session: ServerSession | None = None
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            description=cli or None,
            instructions=(
                "Runs the Arbigent AI end-to-end tests of one project. Call run-arbigent-test-<tag> to run the "
                "scenarios with a tag, run-arbigent-test-all for the whole suite, run-arbigent-scenarios for "
                "chosen scenario ids, run-arbigent-task to have the AI agent check one thing in the app with no "
                "scenario, and list-arbigent-scenarios to see what exists. Each run tool takes an optional "
                "deviceId (needed when several devices are connected). Each run's result.yml, report.html and "
                "screenshots are resources (arbigent://runs/<run-id>/...)."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.server.middleware.append(self._remember_session)

    async def serve(
        self, read_stream: ReadStream[SessionMessage | Exception], write_stream: WriteStream[SessionMessage]
    ) -> None:
        """Serves until the client closes the connection; watches the project file meanwhile."""
        options = self.server.create_initialization_options(
            NotificationOptions(tools_changed=True, resources_changed=True)
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_project)
                await self.server.run(read_stream, write_stream, options)
                tg.cancel_scope.cancel()
        finally:
            self._runs.store.close()

    async def _remember_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        self._session = ctx.session
        return await call_next(ctx)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools_for(self._catalog, lint=self._lint))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        catalog = self._catalog
        try:
            if params.name == LIST_TOOL:
                refuse_unknown_keys(catalog, params.name, params.arguments or {})
                return listing(catalog)
            if params.name == LINT_TOOL and self._lint:
                refuse_unknown_keys(catalog, params.name, params.arguments or {})
                return await self._lint_project()
            selection = selection_for(catalog, params.name, params.arguments or {})
            report = await self._runs.run(selection, _progress_reporter(ctx))
        except ToolCallError as exc:
            logger.warning("{} failed: {}", params.name, exc)
            return _error(self._redactor.text(str(exc), patterns=False))
        except Exception:  # the top of a tool call: log the traceback once, answer with isError
            logger.exception("{} failed unexpectedly", params.name)
            return _error(f"internal error in the arbigent runner while running {params.name}; see the runner's log")
        if self._session is not None:  # a lost notification must not turn a finished run into an error
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError):
                await self._session.send_resource_list_changed()
        return types.CallToolResult(
            content=result_content(report, self._redactor),
            structured_content=self._redactor.data(report.structured(), patterns=False),
            is_error=report.is_error,
        )

    async def _lint_project(self) -> types.CallToolResult:
        """Raises ToolCallError when the CLI cannot be started."""
        runs = self._runs
        try:
            report = await lint_project(runs.config, runs.kill_now)
        except OSError as exc:
            raise ToolCallError(f"could not start {runs.config.binary}: {exc.strerror or exc}") from exc
        return types.CallToolResult(
            content=[types.TextContent(text=self._redactor.text(report.text(), patterns=False))],
            structured_content=None if report.is_error else report.structured(),
            is_error=report.is_error,
        )

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = await anyio.to_thread.run_sync(_resources, self._runs.store)
        start = _page_start(params.cursor if params else None, len(resources))
        end = start + RESOURCES_PAGE
        return types.ListResourcesResult(
            resources=resources[start:end], next_cursor=f"offset:{end}" if end < len(resources) else None
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            data, mime = await anyio.to_thread.run_sync(self._runs.store.read, uri)
        except ArtifactError as exc:
            raise MCPError(RESOURCE_NOT_FOUND, str(exc)) from None
        if mime.startswith("image/"):
            blob = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))
            return types.ReadResourceResult(contents=[blob])
        text = self._redactor.text(data.decode("utf-8", errors="replace"), patterns=False)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    async def _watch_project(self) -> None:
        """Polls the project file; a usable change replaces the tools, a broken one is only logged."""
        path = self._catalog.project.path
        seen: tuple[str, str] | None = None
        problem: str | None = None
        first = True
        while True:
            if not first:
                await anyio.sleep(self._poll_seconds)
            first = False
            try:
                target, text = await anyio.to_thread.run_sync(_read_project, path)
            except YamlFileError as exc:
                if str(exc) != problem:
                    logger.warning("{}; keeping the last good tools", exc)
                problem = str(exc)
                continue
            problem = None
            current = (target, hashlib.sha256(text.encode()).hexdigest())
            if current == seen:
                continue
            if seen is not None and seen[0] != target:
                logger.info("project file {} now points to {}", path, target)
            seen = current
            try:
                project = await anyio.to_thread.run_sync(parse_project, text, path)
            except ProjectError as exc:
                logger.warning("{}; keeping the last good tools", exc)
                continue
            await self._replace(build_catalog(project))

    async def _replace(self, catalog: ProjectTools) -> None:
        changed = tools_for(catalog, lint=self._lint) != tools_for(self._catalog, lint=self._lint)
        self._catalog = catalog
        path = catalog.project.path
        if not changed:
            logger.debug("project file {} read; the tools stay the same", path)
            return
        logger.info("project file {} changed; now serving {} tools", path, len(tools_for(catalog, lint=self._lint)))
        session = self._session
        if session is not None:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await session.send_tool_list_changed()


def result_content(report: RunReport, redactor: Redactor) -> list[types.ContentBlock]:
    """The report's text, the attached screenshots as images, and links to the run's resources."""
    content: list[types.ContentBlock] = [types.TextContent(text=redactor.text(report.text(), patterns=False))]
    for attachment in report.attachments:
        if attachment.data is not None:
            data = base64.b64encode(attachment.data).decode("ascii")
            content.append(types.ImageContent(data=data, mime_type=attachment.mime_type))
    run = report.run
    if run is None:
        return content
    names: list[str] = [name for name in ("result.yml", "report.html") if name in run.files]
    names += [a.uri.removeprefix(run.uri("")) for a in report.attachments]
    for name in dict.fromkeys(names):
        content.append(
            types.ResourceLink(
                uri=run.uri(name),
                name=f"{run.run_id}/{name}",
                title=f"{name} of arbigent run {run.run_id}",
                mime_type=mime_type(name),
            )
        )
    return content


def _read_project(path: Path) -> tuple[str, str]:
    """(the file the path points to now, its text); blocking."""
    return str(path.resolve()), read_text_file(path, what="project file")


def _resources(store: ArtifactStore) -> list[types.Resource]:
    """Every kept file of every kept run, newest run first; blocking (it reads file sizes)."""
    resources = []
    for run in store.runs():
        for name, path in run.files.items():
            try:
                size: int | None = path.stat().st_size
            except OSError:
                size = None
            resources.append(
                types.Resource(
                    uri=run.uri(name),
                    name=f"{run.run_id}/{name}",
                    title=f"{name} of arbigent run {run.run_id} ({run.label})",
                    mime_type=mime_type(name),
                    size=size,
                )
            )
    return resources


def _page_start(cursor: str | None, total: int) -> int:
    """Where the page of `cursor` starts; raises MCPError (invalid params) for a cursor this server never gave.
    Runs that came or went since the previous page shift the rest: at worst a file is listed twice or missed."""
    if cursor is None:
        return 0
    offset = cursor.removeprefix("offset:")
    if cursor.startswith("offset:") and offset.isascii() and offset.isdigit() and len(offset) < 10:
        return min(int(offset), total)
    raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor[:40]!r}: pass the nextCursor of the previous page")


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _progress_reporter(ctx: ServerRequestContext[Any, Any]) -> Progress:
    """Progress for this request: a no-op unless the client sent a progress token."""
    counter = itertools.count(1)

    async def report(message: str) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await ctx.session.report_progress(next(counter), None, message)

    return report
