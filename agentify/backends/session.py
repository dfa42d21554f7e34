"""One MCP session on a link: the SDK's `ClientSession` as agentify configures it, and the start-up requests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.shared.exceptions import MCPError

from agentify import __version__
from agentify.backends.connection import Connection, Link
from agentify.backends.era import Era
from agentify.backends.failures import AuthRequired, StartRejected, StartTimeout, WrongTransport
from agentify.backends.questions import InFlight

RootsGetter = Callable[[], Sequence[types.Root]]


def client_session(
    link: Link, on_message: MessageHandlerFnT, roots: RootsGetter | None, questions: InFlight
) -> ClientSession:
    """A session over `link`; with `roots`, it answers `roots/list` from them (and so advertises roots).
    It advertises elicitation (form and URL) and sampling: `questions` hands them to the call that asked."""
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
        client_info=types.Implementation(name="agentify", version=__version__),
    )


def server_line(info: types.Implementation | None) -> str | None:
    """`name version: description`, as the server describes itself (`list_backends` and `doctor` show it)."""
    if info is None:
        return None
    line = f"{info.name} {info.version}".strip()
    return f"{line}: {info.description}" if info.description else line


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
