"""Requests the gateway sends back to the IDE on the request being served: sampling and elicitation.

`SessionSampler` answers the sampling planner; `SessionConfirmer` asks the user to confirm a
tool call. Both ride the channel of the `tools/call` that carries the task.
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from agentify.confirm_prompt import confirmation_message
from agentify.planner import Plan
from agentify.planner.sampling import MAX_TOKENS, SamplingResult
from agentify.policy import Answer

CONFIRM_TIMEOUT_SECONDS = 600.0
_CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Run this tool call", "default": False},
    },
    "required": ["confirm"],
}


def _capabilities(ctx: ServerRequestContext[Any]) -> types.ClientCapabilities | None:
    return ctx.session.client_capabilities if ctx.session.can_send_request else None


class SessionSampler:
    """Asks the client of `ctx` for a completion."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        capabilities = ctx.session.client_capabilities
        self.supports_tools = bool(capabilities and capabilities.sampling and capabilities.sampling.tools)

    @staticmethod
    def offered_by(ctx: ServerRequestContext[Any]) -> SessionSampler | None:
        capabilities = _capabilities(ctx)
        return SessionSampler(ctx) if capabilities and capabilities.sampling else None

    async def create(
        self, messages: list[types.SamplingMessage], *, system_prompt: str, tools: list[types.Tool] | None
    ) -> SamplingResult:
        with warnings.catch_warnings():
            # Sampling is deprecated in the 2026-07-28 protocol but is what 2025-11-25 IDE clients offer.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            return await self._ctx.session.create_message(
                messages,
                max_tokens=MAX_TOKENS,
                system_prompt=system_prompt,
                tools=tools,
                tool_choice=types.ToolChoice(mode="auto") if tools else None,
                related_request_id=self._ctx.request_id,
            )


class SessionConfirmer:
    """Asks the user of the client of `ctx`, through a form elicitation, whether a call may run."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx

    @staticmethod
    def offered_by(ctx: ServerRequestContext[Any]) -> SessionConfirmer | None:
        capabilities = _capabilities(ctx)
        return SessionConfirmer(ctx) if capabilities and capabilities.elicitation else None

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        message = confirmation_message(plan.backend, plan.tool, plan.arguments, reason)
        result = None
        with anyio.move_on_after(CONFIRM_TIMEOUT_SECONDS):
            try:
                result = await self._ctx.session.elicit_form(message, _CONFIRM_SCHEMA, self._ctx.request_id)
            except MCPError:
                return "cancel"
        if result is None:  # nobody answered: treat it as dismissed
            return "cancel"
        if result.action == "accept" and (result.content or {}).get("confirm") is True:
            return "accept"
        return "decline" if result.action in ("accept", "decline") else "cancel"
