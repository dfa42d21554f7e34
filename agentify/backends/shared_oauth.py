"""A remote OAuth backend with one shared identity, authorized from the IDE on a one-person gateway.

Its tokens are the ones `agentify auth` keeps (`TokenFile`). When the server asks for an authorization (the backend
is `needs_auth`: no tokens yet, or refused ones that a refresh did not mend) or for a wider scope (a 403
`insufficient_scope` step-up), the call that met it asks the person at the IDE to open a URL, the same way a
backend reached as each person does (`url_authorization.py`, both eras), stores the tokens where `agentify auth`
would, and goes on. Meanwhile the session stays up for whatever the current token allows.

Only the person the gateway belongs to may choose the identity everyone's calls carry: over stdio (the user who
started agentify) and over HTTP for `--no-auth` or the one shared token. A named principal of a team gateway is
told to ask whoever runs it (or to have each person authorize as themselves, `auth.perPrincipal`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from loguru import logger
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.calls import ScopeStepUp
from agentify.backends.logs import LogSink
from agentify.backends.oauth import TokenFile
from agentify.backends.principal_flow import FlowTokens
from agentify.backends.questions import Answerer
from agentify.backends.remote import RemoteConnection
from agentify.backends.state import BackendState, BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor, Wiring
from agentify.backends.url_authorization import ask_by_url, never_accepted
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable
from agentify.team.identity import Authorizations
from agentify.team.principal import ANONYMOUS, LOCAL, SHARED, current_principal

OWNERS = (None, LOCAL, ANONYMOUS, SHARED)
"""The principals who may authorize a shared identity: the gateway's own user, not a named person of a team."""


class SharedOAuthBackend(Supervisor):
    asks_by_url = True

    def __init__(self, spec: BackendConfig, wiring: Wiring, routes: Authorizations) -> None:
        w = wiring
        self._store = TokenFile(spec, secrets=w.secrets)
        connection = RemoteConnection(spec, w.secrets, tokens=self._store)
        stderr = StderrLog(spec.id)
        super().__init__(
            spec, connection, stderr, w.manifests, w.on_state, w.roots, w.routes, w.on_change, w.on_log, w.pins
        )
        self._routes = routes
        self._secrets = w.secrets
        self._tg: TaskGroup | None = None

    async def run(self) -> None:
        """The supervisor's owner task, and beside it the authorizations this backend started (they outlive the
        call that asked: a 2026-07-28 round ends before the person is back)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await super().run()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    @staticmethod
    def may_ask() -> bool:
        """Whether the caller is the person this gateway belongs to (who may choose its upstream identity)."""
        return current_principal() in OWNERS

    def status(self) -> BackendStatus:
        own = super().status()
        if not self.may_ask():
            return own
        if self.state is BackendState.NEEDS_AUTH and not self._auth.has_new_credentials():
            return replace(
                own,
                last_error="the server asks for authorization: your next call of one of its tools asks you to open "
                f"a page and sign in (or run `agentify auth {self.spec.id}`)",
            )
        if self._store.missing_scope():
            return replace(
                own,
                last_error=f"asks for the scope {self._store.wanted_scope()} (a step-up): the next call that needs it "
                "asks you to authorize it; other calls go on with the current authorization",
            )
        return own

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult:
        """See `Supervisor.call`; the person is asked to authorize first when they must, and may.

        Raises:
            NeedsAuth, Declined (the person declined), BackendUnavailable, BackendError, TaskTimeout, Denied; what
            the answerer raises (`AskingClient`).
        """
        if not self.may_ask():
            return await self._for_a_team(super().call(tool, arguments, progress, answerer, logs))
        if self._needs_authorization():
            await self._authorize(answerer)
        try:
            return await super().call(tool, arguments, progress, answerer, logs)
        except ScopeStepUp:
            await self._step_up(tool, answerer)
        except BackendUnavailable:
            if not self._needs_authorization():
                raise
            await self._authorize(answerer)
        try:
            return await super().call(tool, arguments, progress, answerer, logs)
        except ScopeStepUp:
            raise never_accepted(self.spec.id, tool, self._store.granted_scope()) from None

    async def live_tool(self, tool: str) -> types.Tool | None:
        """`Supervisor.live_tool`, but a backend waiting for the person to authorize it is not started to read an
        annotation (it would only be refused): the tool as listed in this run, if it was; the call then asks."""
        if self._needs_authorization() and self.may_ask():
            return self.listed_tool(tool)
        return await super().live_tool(tool)

    async def learn(self, answerer: Answerer | None) -> None:
        """Its tools, listed once the person authorized it (nobody had: the server refuses even to list them).

        Raises:
            BackendUnavailable: the caller may not authorize it (a named person of a team), or what `call` raises.
        """
        if self._needs_authorization():
            if not self.may_ask():
                raise BackendUnavailable(self._ask_the_operator("authorization"))
            await self._authorize(answerer)
        await self.live_tool("")

    def _needs_authorization(self) -> bool:
        return self.state is BackendState.NEEDS_AUTH and not self._auth.has_new_credentials()

    async def _step_up(self, tool: str, answerer: Answerer | None) -> None:
        """A 403 `insufficient_scope`: authorized again for the scopes granted plus the new one (kept as the wanted
        scope), unless the tokens hold it already, which authorizing cannot fix (the call is made once more)."""
        if not self._store.missing_scope():
            return
        logger.bind(backend=self.spec.id).info("step-up: {} asks for the scope {}", tool, self._store.wanted_scope())
        await self._authorize(answerer)

    async def _authorize(self, answerer: Answerer | None) -> None:
        if self._tg is None:
            raise BackendUnavailable(f"backend {self.spec.id!r} is stopping; try again")
        store = self._store

        def flow_store() -> FlowTokens:
            return FlowTokens(self.spec, secrets=self._secrets).redirected(self._routes.callback_url())

        async def authorized() -> bool:  # by another call meanwhile, or at a terminal
            if self._needs_authorization():
                return False
            return store.has_tokens() and not store.missing_scope()

        await ask_by_url(
            self.spec,
            self._routes,
            self._tg,
            current_principal() or LOCAL,
            answerer,
            flow_store=flow_store,
            authorized=authorized,
            wanted=store.wanted_scope(),
            whose="for this gateway",
            otherwise=f" (or run `agentify auth {self.spec.id}` where the gateway runs)",
        )

    async def _for_a_team(self, call: Any) -> types.CallToolResult:
        """A named principal's call: what only a new authorization answers says who can give it."""
        try:
            result: types.CallToolResult = await call
        except ScopeStepUp as exc:
            raise ScopeStepUp(self._ask_the_operator("more scope")) from exc
        except BackendUnavailable as exc:
            if self.state is not BackendState.NEEDS_AUTH:
                raise
            raise BackendUnavailable(self._ask_the_operator("authorization")) from exc
        return result

    def _ask_the_operator(self, what: str) -> str:
        return (
            f"backend {self.spec.id!r} asks for {what}, and it is reached with one identity shared by everyone on "
            f"this gateway: ask whoever runs the gateway to run `agentify auth {self.spec.id}`, or to make each person "
            "authorize as themselves (auth.perPrincipal)."
        )
