"""Telling the client that the gateway's tools changed (after the config file was reloaded), in both eras.

2025-11-25: a `notifications/tools/list_changed` on the connection. A new `ServerSession` is built for
every inbound message, but on a stdio connection they all share one outbound channel, so the latest
one can send outside any request.
2026-07-28: change notifications travel only on a `subscriptions/listen` stream that the client opened;
the SDK's `ListenHandler` serves those streams from the bus this publishes to.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged


class ToolChanges:
    def __init__(self) -> None:
        self._session: ServerSession | None = None
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        """The server's `subscriptions/listen` handler (2026-07-28)."""

    async def remember(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A server middleware: keeps the session of the latest message (2025-11-25)."""
        self._session = ctx.session
        return await call_next(ctx)

    async def tools_changed(self) -> None:
        """Tells every listening client; one that has gone is nobody to tell."""
        await self._bus.publish(ToolsListChanged())
        if self._session is not None:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self._session.send_tool_list_changed()
