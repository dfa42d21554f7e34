"""One MCP session on a link: the SDK's `ClientSession` as agentify configures it, and the start-up requests."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from loguru import logger
from mcp import MCPDeprecationWarning
from mcp.client.session import ClientSession, LoggingFnT, MessageHandlerFnT
from mcp.client.subscriptions import Subscription, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError

from agentify import __version__
from agentify._common.background import background
from agentify.backends.connection import Connection, Link
from agentify.backends.era import Era, is_modern
from agentify.backends.failures import AuthRequired, StartRejected, StartTimeout, WrongTransport
from agentify.backends.questions import InFlight

if TYPE_CHECKING:
    from loguru import Logger

SET_LEVEL_SECONDS = 5.0  # how long logging/setLevel may take
LISTEN_ACK_SECONDS = 10.0  # how long a 2026-07-28 server may take to acknowledge subscriptions/listen
RootsGetter = Callable[[], Sequence[types.Root]]


def client_session(
    link: Link, on_message: MessageHandlerFnT, roots: RootsGetter | None, questions: InFlight, on_log: LoggingFnT
) -> ClientSession:
    """A session over `link`; with `roots`, it answers `roots/list` from them (and so advertises roots).
    It advertises elicitation (form and URL) and sampling: `questions` hands them to the call that asked.
    `on_log` hears the server's log messages (it must not block: the SDK runs it before later messages)."""
    list_roots = None
    if roots is not None:
        getter = roots

        async def list_roots(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(roots=list(getter()))

    return ClientSession(
        link.read_stream,
        link.write_stream,
        message_handler=on_message,
        list_roots_callback=list_roots,
        elicitation_callback=questions.elicit,
        sampling_callback=questions.sample,
        logging_callback=on_log,
        client_info=types.Implementation(name="agentify", version=__version__),
    )


def server_line(info: types.Implementation | None) -> str | None:
    """`name version: description`, as the server describes itself (`list_backends` and `doctor` show it)."""
    if info is None:
        return None
    line = f"{info.name} {info.version}".strip()
    return f"{line}: {info.description}" if info.description else line


async def set_log_level(session: ClientSession, level: types.LoggingLevel | None, log: Logger) -> None:
    """`logging/setLevel` (within `SET_LEVEL_SECONDS`) on a 2025-11-25 session whose server declares logging;
    nothing on a 2026-07-28 session, where each call carries its level (`logs.py`). A server that refuses or
    does not answer keeps its own level (said in `log`)."""
    caps = session.server_capabilities
    if level is None or is_modern(session) or caps is None or caps.logging is None:
        return
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    try:
        with anyio.fail_after(SET_LEVEL_SECONDS):
            await session.send_request(request, types.EmptyResult)
        log.debug("asked to log at {} and above", level)
    except (TimeoutError, MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        log.info("logging/setLevel {} was not taken: {}", level, exc)


async def send_roots_changed(session: ClientSession, log: Logger) -> None:
    """`notifications/roots/list_changed`; a session that cannot take it any more is said in `log`."""
    try:
        with warnings.catch_warnings():  # deprecated only in the 2026-07-28 era; backends use 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await session.send_roots_list_changed()
    except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        log.warning("could not send roots/list_changed: {}", exc)


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of `tools/list`."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.send_request(types.ListToolsRequest(params=params), types.ListToolsResult)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            return tools


async def start(
    session: ClientSession, link: Link, connection: Connection, era: Era, limit: float, stderr_hint: Callable[[], str]
) -> list[types.Tool]:
    """`initialize` or `server/discover` (as `era` says) and `tools/list` within `limit` seconds: the tools.

    Raises:
        StartTimeout: not within `limit`.
        StartRejected: the server answered with an error, or exited.
        AuthRequired: the server refused the request with 401.
        WrongTransport: it refused streamable HTTP in the way that means "use SSE", and the connection switched.
    """
    try:
        with anyio.fail_after(limit):
            await era.open(session)
            return await list_tools(session)
    except TimeoutError:
        raise StartTimeout(
            f"did not finish initialize and tools/list within {limit:g} s "
            f"(raise startupTimeoutSeconds if it needs longer). {stderr_hint()}"
        ) from None
    except MCPError as exc:
        if link.refused_status == 401:
            raise AuthRequired from exc
        if link.refused_status in (400, 404, 405) and connection.fall_back():
            raise WrongTransport from exc
        if link.exit_code is not None:
            code = await link.exit_code()
            reason = f"exited with code {code}" if code is not None else f"failed: {exc.error.message}"
            raise StartRejected(f"{reason} during start-up. {stderr_hint()}") from exc
        raise StartRejected(f"failed during start-up: {link.lost_reason or exc.error.message}") from exc


@asynccontextmanager
async def listening(session: ClientSession) -> AsyncIterator[None]:
    """Hears the server's list changes for as long as the block runs, on a 2026-07-28 session.

    On 2025-11-25 a server sends `notifications/*/list_changed` by itself; on 2026-07-28 only to a
    client that listens (`subscriptions/listen`), so this listens for the lists the server says change.
    The notifications reach the session's message handler either way; the stream is only drained here.
    A server that offers no such notifications, or refuses to be listened to, is simply not heard."""
    found = session.discover_result
    offered = found.capabilities if found is not None else None
    tools = bool(offered and offered.tools and offered.tools.list_changed)
    prompts = bool(offered and offered.prompts and offered.prompts.list_changed)
    resources = bool(offered and offered.resources and offered.resources.list_changed)
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(background())
        if is_modern(session) and (tools or prompts or resources):
            try:
                with anyio.fail_after(LISTEN_ACK_SECONDS):
                    subscription = await stack.enter_async_context(
                        listen(
                            session,
                            tools_list_changed=tools,
                            prompts_list_changed=prompts,
                            resources_list_changed=resources,
                        )
                    )
                tg.start_soon(_drain, subscription)
            except (MCPError, SubscriptionLost, TimeoutError) as exc:
                logger.info("the server's list changes cannot be listened to ({}); its lists are read once", exc)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()  # before the subscription closes: its drain must not read a closed stream


async def _drain(subscription: Subscription) -> None:
    try:
        async for _ in subscription:
            pass  # the message handler saw it already
    except SubscriptionLost:
        logger.info("the server ended its list-change subscription")
