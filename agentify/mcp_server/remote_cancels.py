"""Middleware: with `server.redis`, every request that reaches a backend runs booked in the replica's `CallBook`
(`team/cancellations.py`), so that a cancel its client sent to another replica ends it here.

Booked: tool calls, resource reads, prompts, completions, subscriptions and the lists of resources, templates and
prompts (which ask the live backends). The request is cancelled as when its client's cancel arrives where it runs:
the backend gets its own `notifications/cancelled`, and the caller, whose request is still open, gets the
`cancelled` error (a tool call's error result; for the rest, the JSON-RPC error the SDK answers a cancelled
2025-11-25 request with). Runs after the principal is known (the key is the principal's, so no one cancels
another's request). Booking is local (a dict entry); Redis is used only by the cancel that misses it.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, REQUEST_CANCELLED
from mcp.shared.exceptions import MCPError

from agentify.errors import TaskCancelled
from agentify.mcp_server.operations import AUDITED
from agentify.mcp_server.results import error_result
from agentify.team.cancellations import UNBOOKED, CallBook, call_key
from agentify.team.principal import current_principal

CANCELLED = "the client cancelled this call; its backend was told to stop"
REQUEST_CANCELLED_MESSAGE = "the client cancelled this request; its backend was told to stop"
BOOKED = frozenset(
    (
        *AUDITED,
        "resources/subscribe",
        "resources/unsubscribe",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    )
)
"""The requests that reach a backend (and may take as long as it does)."""


def cancellable(book: CallBook) -> Any:
    async def run(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        principal = current_principal()
        if ctx.method not in BOOKED or ctx.request_id is None or principal is None or principal in UNBOOKED:
            return await call_next(ctx)
        session = ctx.request.headers.get(MCP_SESSION_ID_HEADER) if ctx.request is not None else None
        with book.running(call_key(str(principal), session, ctx.request_id)):
            return await call_next(ctx)
        # Here only when the book cancelled the request (a cancel POSTed to any replica): any other cancellation
        # goes on.
        if ctx.method == "tools/call":
            return error_result(TaskCancelled(CANCELLED), ctx.lifespan_context.redactor)
        raise MCPError(REQUEST_CANCELLED, REQUEST_CANCELLED_MESSAGE, {"agentify/error": {"code": "cancelled"}})

    return run
