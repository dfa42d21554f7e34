"""Change notifications to every connected client, in either protocol era.

A 2025-11-25 client gets `notifications/*/list_changed` on its connection (the SDK's connection
drops them for a 2026-07-28 one). A 2026-07-28 client gets them only on a `subscriptions/listen`
stream it opened: the server's `ListenHandler` serves those from `bus`. Connections are learnt
from the requests they send and held weakly, so a client that went away is simply forgotten.
"""

from __future__ import annotations

import weakref
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ServerEvent
from mcp.shared.subscriptions import event_to_notification


class ChangeNotifier:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()

    def listen_handler(self) -> ListenHandler:
        """The `subscriptions/listen` handler that 2026-07-28 clients get these events from."""
        return ListenHandler(self.bus)

    async def remember(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: every connection that sent a request is told of changes from then on.

        The SDK's request context offers the connection only through its session (a new session object per
        message, around the one connection); without it, 2025-11-25 clients would not be told."""
        connection = getattr(ctx.session, "_connection", None)
        if isinstance(connection, Connection):
            self._connections.add(connection)
        return await call_next(ctx)

    async def publish(self, event: ServerEvent) -> None:
        """Never raises: a connection that closed drops the notification (`Connection.notify`)."""
        await self.bus.publish(event)
        notification = event_to_notification(event, {})
        params = notification.params.model_dump(by_alias=True, exclude_none=True) if notification.params else None
        for connection in list(self._connections):
            await connection.notify(notification.method, params or None)
