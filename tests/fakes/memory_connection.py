"""A `Connection` to a real MCP server running in process, over memory streams: the supervisor's
tests drive the real `ClientSession` and the SDK's low-level `Server` without a subprocess.

`fail_opens` makes the next opens raise (an `AuthRequired` from the transport, an `OSError` from a
spawn, anything); `drop()` ends the live server as a crashed process would, and `refuse()` as a
server that refuses the token mid-session (the transport raises `AuthRequired`); `tools` is what the
server lists, and its `grow` tool adds one and sends `notifications/tools/list_changed`; `metas` is
the `_meta` of every `tools/call` it received. Its `ask` tool asks its user by server-to-client request,
which a 2026-07-28 session cannot carry (the SDK's `NoBackChannelError`); `refuse_calls` refuses the next
calls as an OAuth server that no longer takes the token answers a request (HTTP 401, the link ends).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import SessionMessage
from mcp_types.version import is_version_at_least

from agentify.backends.connection import Link
from agentify.backends.failures import AuthRequired, SessionFailure, Unexpected, Unreachable

OBJECT = {"type": "object", "properties": {}}


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, description=f"the {name} tool", input_schema=OBJECT)


class MemoryConnection:
    kind = "memory"

    def __init__(
        self, tools: list[str] | None = None, *, hang_listing: bool = False, handlers: dict[str, Any] | None = None
    ) -> None:
        """`handlers`: more `Server(...)` handlers (resources, prompts...) for the server to offer."""
        self.tools = [tool(name) for name in (tools or ["echo", "grow"])]
        self.handlers = handlers or {}
        self.hang_listing = hang_listing
        self.fail_opens: list[BaseException] = []
        self.metas: list[dict[str, Any]] = []
        self.opens = 0
        self.refreshes = 0
        self.stamp = 0.0
        self.refreshable = True
        self.refuse_calls = 0
        self.hung = anyio.Event()
        """Set once a `tools/list` hangs (`hang_listing`)."""
        self._live: anyio.CancelScope | None = None
        self._link: Link | None = None
        self._refusing = False

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Link]:
        self.opens += 1
        if self.fail_opens:
            raise self.fail_opens.pop(0)
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        server_writes, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        link = self._link = Link(read_stream=from_server, write_stream=to_server)  # type: ignore[arg-type]
        server = self._server()

        async def serve(*, task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
            with anyio.CancelScope() as scope:
                task_status.started(scope)
                async with server_reads, server_writes:
                    await server.run(server_reads, server_writes, server.create_initialization_options())
            if self._refusing:
                self._refusing = False
                raise AuthRequired
            link.lost_reason = link.lost_reason or "the server left"
            link.gone.set()

        async with anyio.create_task_group() as tg:
            self._live = await tg.start(serve)
            try:
                yield link
            finally:
                tg.cancel_scope.cancel()

    def drop(self) -> None:
        """Ends the live server at once, as a backend that crashed."""
        assert self._live is not None
        self._live.cancel()

    def refuse(self) -> None:
        """The live server refuses the token from now on: the transport raises `AuthRequired`."""
        self._refusing = True
        self.drop()

    def fall_back(self) -> bool:
        return False

    def retry_auth(self) -> bool:
        if not self.refreshable:
            return False
        self.refreshes += 1
        return True

    def auth_stamp(self) -> float:
        return self.stamp

    def failure(self, exc: BaseException) -> SessionFailure:
        if isinstance(exc, OSError):
            return Unreachable(f"cannot start the memory server: {exc}")
        return Unexpected(f"unexpected failure: {type(exc).__name__}: {exc}")

    def _server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            if self.hang_listing:
                self.hung.set()
                await anyio.sleep_forever()
            return types.ListToolsResult(tools=list(self.tools))

        bus = InMemorySubscriptionBus()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            self.metas.append(dict(params.meta or {}))
            if self.refuse_calls:
                self.refuse_calls -= 1
                assert self._link is not None
                self._link.refused_status = 401
                self.refuse()
                await anyio.sleep_forever()  # cancelled with the server: the call is never answered
            if params.name == "ask" and is_version_at_least(ctx.session.protocol_version, "2026-07-28"):
                raise NoBackChannelError("elicitation/create")
            if params.name == "grow":
                self.tools.append(tool(f"grown{len(self.tools)}"))
                # 2025-11-25 clients hear it on the session; 2026-07-28 ones through subscriptions/listen.
                await ctx.session.send_tool_list_changed()
                await bus.publish(ToolsListChanged())
            return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ran")])

        listen = {"on_subscriptions_listen": ListenHandler(bus)}
        return Server("memory", on_list_tools=list_tools, on_call_tool=call_tool, **(listen | self.handlers))
