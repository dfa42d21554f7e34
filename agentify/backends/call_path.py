"""A call's way to one backend: the live session to call on, the call on it, and the one call again after the
owner task restarted that session.

The session comes from the supervisor (`acquire`: it starts the backend first if needed, bounded); the call
itself and what its failures mean are `calls.py`'s. A call is made again once, on a new session, when the old
one could not carry it but a new one can: the OAuth server refused the token (the owner refreshes it), or the
session's 2026-07-28 era had no back-channel for the backend's question (the era fell back, `era.py`).
Nothing here enters or leaves a session: that is the owner task's alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.auth_recovery import AuthRecovery
from agentify.backends.calls import call_tool, send_request
from agentify.backends.connection import Link
from agentify.backends.era import Era, EraFellBack
from agentify.backends.idle import IdleClock
from agentify.backends.logs import LogSink
from agentify.backends.questions import Answerer, InFlight
from agentify.backends.routes import ResourceRoutes
from agentify.backends.session import RootsGetter
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable, Denied
from agentify.team.principal import current_principal

_R = TypeVar("_R", bound=types.Result)


@dataclass(frozen=True, kw_only=True)
class CallPath:
    """How one backend's calls and requests run; built by its supervisor, safe to use from any task."""

    spec: BackendConfig
    acquire: Callable[[], Awaitable[tuple[ClientSession, Link]]]
    """The live session and its link, the backend started first if needed. Raises BackendUnavailable."""
    reopen: Callable[[], None]
    """Asks the owner task to end the live session and start a new one (the era fell back)."""
    start_limit: float
    """How long a call to be made again waits for the owner to end the session it could not use."""
    idle: IdleClock
    era: Era
    questions: InFlight
    stderr_hint: Callable[[], str]
    """What the backend's stderr last said, read only when a call fails."""
    auth: AuthRecovery
    routes: ResourceRoutes
    roots: RootsGetter | None
    """What a backend's `roots/list` is answered with: None unless it forwards roots."""

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        answerer: Answerer | None,
        logs: LogSink | None,
    ) -> types.CallToolResult:
        """See `Supervisor.call`."""
        if not self.spec.tools.permits(tool):
            raise Denied(f"{self.spec.id}.{tool} is not allowed by tools.allow / tools.deny of the backend's config")
        session, link = await self.acquire()
        result: types.CallToolResult | None = None
        try:
            result = await self._call_on(session, link, tool, arguments, progress, answerer, logs)
        except BackendUnavailable:
            if not self.auth.call_may_be_retried(link):
                raise
        except EraFellBack:
            self.reopen()
        if result is None:
            with anyio.move_on_after(self.start_limit):
                await link.gone.wait()  # the owner ends that session, then starts one (a refreshed token, an older era)
            session, link = await self.acquire()
            result = await self._call_on(session, link, tool, arguments, progress, answerer, logs)
        self.routes.carried(self.spec.id, result, current_principal())  # read from here by its caller only
        return result

    async def request(self, request: types.ClientRequest, result_type: type[_R]) -> _R:
        """See `Supervisor.request`."""
        session, link = await self.acquire()
        self.idle.begin()
        try:
            return await send_request(session, link, self.spec, request, result_type)
        finally:
            self.idle.end()

    async def _call_on(
        self,
        session: ClientSession,
        link: Link,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        answerer: Answerer | None,
        logs: LogSink | None,
    ) -> types.CallToolResult:
        self.idle.begin()
        try:
            call = call_tool(
                session,
                link,
                self.spec,
                tool,
                arguments,
                progress,
                self.stderr_hint,
                self.questions,
                answerer,
                self.roots,
                logs,
            )
            return await self.era.watch(session, call)
        finally:
            self.idle.end()
