"""The console's one WebSocket: a snapshot, then every log, trace and backend event as JSON.

Events come from the bus through a bounded subscription, so the gateway never waits for a
browser: a client that falls behind loses its subscription (the bus drops it), and one whose
socket stops draining (a send that takes longer than `SEND_SECONDS`) is disconnected. Either
way the page reconnects and starts again from a fresh snapshot.

Messages: `{"kind": "snapshot", "data": {"status", "backends", "logs", "traces", "confirmations"}}`
first, then `{"kind": "log" | "trace" | "backend" | "confirm", "time", "data"}`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from loguru import logger
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from agentify.console.confirmations import ConsoleConfirmer
from agentify.console.security import SUBPROTOCOL
from agentify.console.views import Views
from agentify.gateway.events import Event

if TYPE_CHECKING:
    from agentify.console.views import ConsoleServices

SEND_SECONDS = 5.0
CLOSE_SECONDS = 1.0
SNAPSHOT_LOGS = 500
SNAPSHOT_TRACES = 100
TRY_AGAIN_LATER = 1013
FELL_BEHIND = "fell behind the gateway's events; reconnect"
STALLED = "stopped reading; reconnect"


def event_stream(
    services: ConsoleServices, views: Views, confirmer: ConsoleConfirmer
) -> Callable[[WebSocket], Awaitable[None]]:
    async def stream(websocket: WebSocket) -> None:
        # The page offers the token as a second subprotocol: never echo that one back.
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        events = services.bus.subscribe()
        # No await since subscribing: the stream holds exactly the events after this snapshot.
        snapshot = {"kind": "snapshot", "time": time.time(), "data": _snapshot(views, confirmer)}
        reason: str | None = None
        with events:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, websocket, tg.cancel_scope)
                try:
                    reason = await pump(events, websocket.send_text, views.redact, first=snapshot)
                except WebSocketDisconnect:
                    pass
                tg.cancel_scope.cancel()
        if reason is not None:
            logger.info("console WebSocket client dropped: it {}", reason.split(";")[0])
            await _close(websocket, reason)

    return stream


async def pump(
    events: MemoryObjectReceiveStream[Event],
    send_text: Callable[[str], Awaitable[None]],
    redact: Callable[[Any], Any],
    *,
    first: dict[str, Any] | None = None,
    seconds: float = SEND_SECONDS,
) -> str:
    """Sends `first`, then every event until the bus drops this reader (`FELL_BEHIND`) or a
    send does not finish within `seconds` (`STALLED`). Raises WebSocketDisconnect."""
    if first is not None and not await _send(send_text, first, seconds):
        return STALLED
    async for event in events:
        if not await _send(send_text, redact(event.as_dict()), seconds):
            return STALLED
    return FELL_BEHIND


def _snapshot(views: Views, confirmer: ConsoleConfirmer) -> dict[str, Any]:
    return {
        "status": views.status(),
        "backends": views.backends(),
        "logs": views.logs(limit=SNAPSHOT_LOGS),
        "traces": views.traces(SNAPSHOT_TRACES),
        "confirmations": views.redact(confirmer.pending()),
    }


async def _send(send_text: Callable[[str], Awaitable[None]], message: dict[str, Any], seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await send_text(json.dumps(message, default=str))
        return True
    return False


async def _cancel_on_disconnect(websocket: WebSocket, scope: anyio.CancelScope) -> None:
    """Reads (and ignores) what the page sends, so a closed tab is noticed at once."""
    while (await websocket.receive())["type"] != "websocket.disconnect":
        pass
    scope.cancel()


async def _close(websocket: WebSocket, reason: str) -> None:
    if websocket.client_state is not WebSocketState.CONNECTED:
        return
    with anyio.move_on_after(CLOSE_SECONDS):
        try:
            await websocket.close(code=TRY_AGAIN_LATER, reason=reason)
        except WebSocketDisconnect:
            pass
