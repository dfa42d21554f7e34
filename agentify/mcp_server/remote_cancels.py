"""Middleware: with `server.redis`, every tool call runs booked in the replica's `CallBook`
(`team/cancellations.py`), so that a cancel its client sent to another replica ends it here.

The call is cancelled as when its client's cancel arrives where it runs: the backend gets its own
`notifications/cancelled`, and the caller, whose request is still open, gets the `cancelled` error.
Runs after the principal is known (the key is the principal's, so no one cancels another's call).
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from agentify.errors import TaskCancelled
from agentify.mcp_server.results import error_result
from agentify.team.cancellations import UNBOOKED, CallBook, call_key
from agentify.team.principal import current_principal

CANCELLED = "the client cancelled this call; its backend was told to stop"


def cancellable(book: CallBook) -> Any:
    async def run(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        principal = current_principal()
        if ctx.method != "tools/call" or ctx.request_id is None or principal is None or principal in UNBOOKED:
            return await call_next(ctx)
        session = ctx.request.headers.get(MCP_SESSION_ID_HEADER) if ctx.request is not None else None
        with book.running(call_key(str(principal), session, ctx.request_id)):
            return await call_next(ctx)
        # Here only when the book cancelled the call (a cancel POSTed to any replica): any other cancellation goes on.
        return error_result(TaskCancelled(CANCELLED), ctx.lifespan_context.redactor)

    return run
