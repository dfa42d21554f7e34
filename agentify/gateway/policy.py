"""The safety policy: which tool calls need the user's confirmation before they run.

A call needs confirmation when its tool is listed in the backend's `tools.confirm`, or when
the backend marks it destructive (`destructiveHint: true` and not `readOnlyHint`) and the
backend does not set `allowDestructive: true`. Tools without annotations are not treated as
destructive. Denied tools (`tools.deny`) never reach the planner at all (`ToolFilter`).

The annotations read are the ones the running backend listed, never the cached tool manifest
(a file on disk may have been edited to turn a destructive tool read-only): a tool that no
session of this run has listed is treated as destructive. `tools.confirm`
names the backend's own tool names, also for a tool that `tools.overrides` renames.
"""

from __future__ import annotations

from typing import Literal, Protocol

import mcp_types as types

from agentify.config import BackendConfig
from agentify.errors import Denied
from agentify.gateway.confirm_prompt import unshowable
from agentify.planner import Plan

Answer = Literal["accept", "decline", "cancel"]


class AskingClient(Exception):
    """The task needs an answer from the client (a confirmation, a sampling reply, its roots) that can
    only come in a later round of the same `tools/call` (protocol 2026-07-28: `InputRequiredResult`).

    Raised through the task runner, which ends the round's trace as "waiting"; the MCP handler
    turns it into the `InputRequiredResult`. `trace_id` is that round's trace."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.trace_id: str | None = None


class Confirmer(Protocol):
    """Asks the user (MCP elicitation) whether a planned call may run."""

    async def confirm(self, plan: Plan, reason: str) -> Answer: ...


def confirmation_reason(spec: BackendConfig, origin: str, listed: types.Tool | None) -> str | None:
    """Why a call of the backend's tool `origin` (its own name, whatever `tools.overrides` shows) must be
    confirmed, or None when it may run without asking. `listed` is the tool as the running backend listed
    it, None when it has not."""
    if origin in spec.tools.confirm:
        return f"{origin} is listed in tools.confirm of backend {spec.id!r}"
    if spec.allow_destructive:
        return None
    if listed is None:
        return (
            f"{spec.id}.{origin} is treated as destructive: the running backend has not listed it "
            "(only its cached tool manifest has)"
        )
    hints = listed.annotations
    if hints and hints.destructive_hint and not hints.read_only_hint:
        return f"{spec.id}.{origin} is marked destructive by its server"
    return None


async def enforce(plan: Plan, spec: BackendConfig, reason: str | None, confirmer: Confirmer | None) -> None:
    """Returns when the call may run. Raises Denied when it may not."""
    if reason is None:
        return
    call = f"{plan.backend}.{plan.tool}"
    if (hidden := unshowable(plan.arguments)) is not None:
        raise Denied(
            f"{call} needs your confirmation ({reason}), but {hidden}: too long to show in a confirmation, "
            "so it was not run. Use a shorter path (a nearer working directory, or fewer ../ hops)."
        )
    if confirmer is None:
        origin = plan.handle.origin if plan.handle is not None else plan.tool
        how = (
            f"remove {origin} from tools.confirm of backend {spec.id!r}"
            if origin in spec.tools.confirm
            else f"set allowDestructive: true on backend {spec.id!r} in the config"
        )
        raise Denied(
            f"{call} needs your confirmation ({reason}), but this client cannot ask (it does not support "
            f"MCP elicitation), so it was not run. To allow it without asking, {how}."
        )
    answer = await confirmer.confirm(plan, reason)
    if answer == "accept":
        return
    verb = "declined" if answer == "decline" else "dismissed"
    raise Denied(f"you {verb} the confirmation for {call}, so it was not run.")
