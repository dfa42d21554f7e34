"""The MCP face of the backends' resources, prompts and completions: thin handlers over `Offerings`,
the capabilities the gateway declares, and the backends' changes relayed to the IDE.

Changes reach each client the way its protocol era delivers them: a 2025-11-25 session gets the
notification on its connection (`resources/updated` only for a URI it subscribed to); a 2026-07-28
client gets it on the `subscriptions/listen` stream it opened (the SDK's `ListenHandler`), where the
URIs it listens to are subscribed at their backends for as long as the stream lasts.

A backend reached as each person (`auth.perPrincipal`) has a session per principal: what one person's session
says (`Change.principal`) reaches only the clients of that principal, on either era, and a subscription to
such a backend's resource is made on the subscriber's own session.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, suppress
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import mcp_types as types
from loguru import logger
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentify.backends.offers import Change
from agentify.errors import AgentifyError, Forbidden
from agentify.gateway.offers import Offerings
from agentify.security.redact import Redactor
from agentify.team import operations
from agentify.team.principal import LOCAL, current_principal

SETTLE_SECONDS = 2.0
"""How long `initialize` waits for backends never seen before to say what they offer (see `capabilities`)."""
MAX_ERROR_CHARS = 8000
"""The longest error message, and error data as JSON, that the IDE gets from a backend or the gateway."""
_QUEUE = 256
MAX_SUBSCRIPTIONS = 1000
"""The most resource subscriptions one 2025-11-25 client (session) holds at once."""
_R = TypeVar("_R", bound=types.Result)
_EVENTS: dict[str, Callable[[Change], ServerEvent]] = {
    "tools": lambda change: ToolsListChanged(),
    "resources": lambda change: ResourcesListChanged(),
    "prompts": lambda change: PromptsListChanged(),
    "resource": lambda change: ResourceUpdated(uri=change.uri or ""),
}
_NOTIFICATIONS: dict[str, Callable[[Change], types.ServerNotification]] = {
    "tools": lambda change: types.ToolListChangedNotification(),
    "resources": lambda change: types.ResourceListChangedNotification(),
    "prompts": lambda change: types.PromptListChangedNotification(),
    "resource": lambda change: types.ResourceUpdatedNotification(
        params=types.ResourceUpdatedNotificationParams(uri=change.uri or "")
    ),
}


def _principal() -> str:
    """The principal of the request being served, as a per-person backend names it (stdio's user is `LOCAL`)."""
    return current_principal() or LOCAL


class PrincipalBus:
    """The SDK's `SubscriptionBus` in this process, where each listen stream belongs to the principal who opened
    it (`ListenHandler` subscribes in the request's context): `publish` reaches every stream, `publish_to` only
    one principal's. Listeners are synchronous."""

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[str, Callable[[ServerEvent], None]]] = {}

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (_principal(), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    async def publish(self, event: ServerEvent) -> None:
        await self.publish_to(event, None)

    async def publish_to(self, event: ServerEvent, principal: str | None) -> None:
        """`event` to the streams of `principal` (None: every stream)."""
        for owner, listener in list(self._listeners.values()):
            if principal is None or owner == principal:
                try:
                    listener(event)
                except Exception:  # the fan-out's boundary, as the SDK's bus: one stream must not starve the others
                    logger.exception("a subscriptions/listen stream failed to take an event")
        await anyio.lowlevel.checkpoint()  # a burst of events lets the streams drain between them


class ChangeRelay:
    """Owns the clients' change channels; `changed` may be called from any task and never blocks."""

    def __init__(self, offerings: Offerings) -> None:
        self._offerings = offerings
        self.bus = PrincipalBus()
        self._listen = ListenHandler(self.bus)
        self._legacy: dict[Connection, str] = {}
        """2025-11-25 connections, each with its principal"""
        self._subscribed: dict[str, set[Connection]] = {}
        self._send, self._receive = anyio.create_memory_object_stream[Change](_QUEUE)

    def changed(self, change: Change) -> None:
        try:
            self._send.send_nowait(change)
        except anyio.WouldBlock:
            logger.warning("too many backend changes at once; dropped {} of {}", change.kind, change.backend)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with self._receive:
            async for change in self._receive:
                try:
                    await self._deliver(change)
                except Exception:  # the top of the relay's task: one bad delivery must not end the server
                    logger.exception("relaying {} of backend {} failed", change.kind, change.backend)

    async def _deliver(self, change: Change) -> None:
        logger.debug("relaying {} of {} {}", change.kind, change.backend, change.uri or "")
        targets = set(self._legacy) if change.kind != "resource" else self._subscribed.get(change.uri or "", set())
        if change.principal is not None:  # one person's session said it: theirs alone
            targets = {c for c in targets if self._legacy.get(c) == change.principal}
        notification = _NOTIFICATIONS[change.kind](change)
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        for connection in list(targets):
            try:
                await connection.outbound.notify(data["method"], data.get("params"))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError) as exc:
                logger.debug("a client went away before {} reached it: {}", data["method"], exc)
                self._forget(connection)
        await self.bus.publish_to(_EVENTS[change.kind](change), change.principal)

    def remember(self, connection: Connection) -> None:
        """A 2025-11-25 connection (of the request's principal): told of list changes until it closes."""
        if connection.protocol_version not in MODERN_PROTOCOL_VERSIONS and connection not in self._legacy:
            self._legacy[connection] = _principal()
            connection.exit_stack.callback(self._forget, connection)

    def _forget(self, connection: Connection) -> None:
        """A closed connection; the backend's subscription stays (its updates then reach nobody) until restart."""
        self._legacy.pop(connection, None)
        for uri, connections in list(self._subscribed.items()):
            connections.discard(connection)
            if not connections:
                del self._subscribed[uri]

    async def subscribe(self, connection: Connection, uri: str, *, subscribe: bool) -> None:
        """`resources/subscribe` of a 2025-11-25 client: at the owning backend, where it supports it. A
        subscription the backend side refuses (a URI nobody owns, a filter, a rate limit) is not kept, and a
        client holds at most `MAX_SUBSCRIPTIONS` (MCPError past it). At a backend reached as each person, each
        principal's own session holds the subscription: made with their first, ended with their last."""
        personal = await self._offerings.personal(uri)
        listeners = self._subscribed.setdefault(uri, set())
        who = self._legacy.get(connection, _principal())  # remembered before (`connection_keeper`)
        sharing = {c for c in listeners if self._legacy.get(c) == who} if personal else listeners
        first, last = not sharing, sharing == {connection}
        if subscribe and connection not in listeners and self._count(connection) >= MAX_SUBSCRIPTIONS:
            if not listeners:
                del self._subscribed[uri]
            raise MCPError(
                types.INVALID_PARAMS,
                f"this client holds {MAX_SUBSCRIPTIONS} resource subscriptions, the most one may: unsubscribe first",
            )
        (listeners.add if subscribe else listeners.discard)(connection)
        if not listeners:
            del self._subscribed[uri]
        if (subscribe and first) or (not subscribe and last):
            try:
                await self._offerings.subscribe(uri, subscribe=subscribe)
            except BaseException:
                if subscribe:
                    self._unsubscribed(connection, uri)
                raise

    def _count(self, connection: Connection) -> int:
        return sum(connection in listeners for listeners in self._subscribed.values())

    def _unsubscribed(self, connection: Connection, uri: str) -> None:
        listeners = self._subscribed.get(uri)
        if listeners is not None:
            listeners.discard(connection)
            if not listeners:
                del self._subscribed[uri]

    async def listen(self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams) -> Any:
        """`subscriptions/listen` of a 2026-07-28 client: its URIs are subscribed at their backends meanwhile."""
        uris = list(params.notifications.resource_subscriptions or [])[:100]
        async with AsyncExitStack() as stack:
            for uri in uris:
                try:
                    if await self._offerings.subscribe(uri):
                        stack.push_async_callback(self._unsubscribe_quietly, uri)
                except (MCPError, AgentifyError) as exc:  # a URI nobody owns simply never fires
                    logger.info("not subscribed to {} at a backend: {}", uri[:200], exc)
            return await self._listen(ctx, params)

    async def _unsubscribe_quietly(self, uri: str) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5), suppress(MCPError, AgentifyError):
            await self._offerings.subscribe(uri, subscribe=False)

    def close(self) -> None:
        self._listen.close()
        self._send.close()


def capabilities_writer(
    offerings: Callable[[ServerRequestContext[Any, Any]], Offerings],
) -> Callable[..., Any]:
    """Middleware: the `capabilities` of `initialize` and `server/discover` say what the backends offer."""

    async def write(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("initialize", "server/discover"):
            return await call_next(ctx)
        found = offerings(ctx)
        await found.settle(SETTLE_SECONDS)
        result = await call_next(ctx)
        if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
            caps = {k: v for k, v in result["capabilities"].items() if k not in ("resources", "prompts", "completions")}
            # The gateway's tools follow the backends' (expose "tools"): over HTTP too, not only over stdio.
            caps["tools"] = {**(caps.get("tools") or {}), "listChanged": True}
            result = {**result, "capabilities": caps | found.capabilities()}
        return result

    return write


def relayed(redactor: Redactor, result: _R) -> _R:
    """A backend's result as the IDE gets it: unchanged but for credentials it echoed."""
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return type(result).model_validate(redactor.data(dumped, patterns=False))


async def answered(redactor: Redactor, work: Awaitable[_R]) -> _R:
    """Runs `work`; what fails becomes the JSON-RPC error the IDE sees (masked and bounded, a backend's
    `data` as much as its message: a backend may echo what it knows there, its env and its tokens)."""
    try:
        return relayed(redactor, await work)
    except MCPError as exc:
        raise MCPError(
            exc.error.code, redactor.bounded(exc.error.message, MAX_ERROR_CHARS), _data(redactor, exc.error.data)
        ) from None
    except Forbidden as exc:  # the client's request, not the gateway, is what failed
        operations.failed(exc.code)  # the audit's decision and outcome
        data = {"agentify/error": {"code": exc.code}}
        raise MCPError(types.INVALID_REQUEST, redactor.bounded(exc.message, MAX_ERROR_CHARS), data) from None
    except AgentifyError as exc:
        operations.failed(exc.code)  # the audit's outcome: the protocol error below carries no code
        raise MCPError(
            types.INTERNAL_ERROR, redactor.bounded(f"agentify {exc.code}: {exc.message}", MAX_ERROR_CHARS)
        ) from None


def _data(redactor: Redactor, data: Any) -> Any:
    """A backend error's `data`, masked; when its JSON is longer than `MAX_ERROR_CHARS`, that JSON as a
    cut string (the IDE gets the start of what the backend said, not a structure it could not read)."""
    if data is None:
        return None
    masked = redactor.data(data, patterns=False, limit=MAX_ERROR_CHARS)
    spelled = json.dumps(masked, ensure_ascii=False)
    return masked if len(spelled) <= MAX_ERROR_CHARS else redactor.bounded(spelled, MAX_ERROR_CHARS)


class OfferContext(Protocol):
    """What the handlers use of the server's lifespan context."""

    @property
    def offerings(self) -> Offerings: ...

    @property
    def redactor(self) -> Redactor: ...

    @property
    def relay(self) -> ChangeRelay: ...


def offer_handlers(context: Callable[[ServerRequestContext[Any, Any]], OfferContext]) -> dict[str, Any]:
    """The `Server(...)` handlers of resources, prompts and completions (`context` finds the services)."""

    def answer(ctx: ServerRequestContext[Any, Any], work: Callable[[Offerings], Awaitable[_R]]) -> Awaitable[_R]:
        found = context(ctx)
        return answered(found.redactor, work(found.offerings))

    def cursor(params: types.PaginatedRequestParams | None) -> str | None:
        return params.cursor if params is not None else None

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return await answer(ctx, lambda o: o.list_resources(cursor(params)))

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await answer(ctx, lambda o: o.list_templates(cursor(params)))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await answer(ctx, lambda o: o.read_resource(str(params.uri)))

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await answer(ctx, lambda o: o.list_prompts(cursor(params)))

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await answer(ctx, lambda o: o.get_prompt(params.name, params.arguments))

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        return await answer(ctx, lambda o: o.complete(params))

    def subscription(subscribe: bool) -> Callable[..., Awaitable[types.EmptyResult]]:
        async def handle(ctx: Any, params: types.SubscribeRequestParams | types.UnsubscribeRequestParams) -> Any:
            found = context(ctx)
            connection: Connection = ctx.session._connection  # the SDK gives no public handle on it
            await answered(
                found.redactor, _empty(found.relay.subscribe(connection, str(params.uri), subscribe=subscribe))
            )
            return types.EmptyResult()

        return handle

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        return await context(ctx).relay.listen(ctx, params)

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read_resource,
        "on_subscribe_resource": subscription(True),
        "on_unsubscribe_resource": subscription(False),
        "on_subscriptions_listen": listen,
        "on_list_prompts": list_prompts,
        "on_get_prompt": get_prompt,
        "on_completion": complete,
    }


async def _empty(work: Awaitable[None]) -> types.EmptyResult:
    await work
    return types.EmptyResult()


def connection_keeper(relay: Callable[[ServerRequestContext[Any, Any]], ChangeRelay]) -> Callable[..., Any]:
    """Middleware: every 2025-11-25 connection is remembered (once its handshake settled the era), to be told
    of the backends' changes."""

    async def keep(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "initialize":
            relay(ctx).remember(ctx.session._connection)  # the SDK gives no public handle on it
        return await call_next(ctx)

    return keep
