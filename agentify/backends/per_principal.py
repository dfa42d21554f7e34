"""A remote backend with `auth.perPrincipal`: every person reaches it as themselves, on a session of their own.

The backend (this front) is one entry of the catalog; its tools are whatever the sessions of any person listed
(kept in the manifest, as for any backend). Behind it, each principal has an inner `Supervisor` whose
connection carries that principal's own tokens from the vault (`VaultTokens`): it starts on their first call,
stops when idle, and at most `maxPeople` (256) are kept (the least recently used with nothing in flight is closed to
make room, `people.py`).

A call by a principal who has no tokens yet (or whose tokens the server refused, or that lack a scope it asked
for) first asks that person to open a URL (URL-mode elicitation, through the relay every backend question
takes, `gateway/backend_questions.py`, so both protocol eras get it the way they take questions: see
`url_authorization.py`). The authorization itself runs on this replica (`principal_flow.drive`), owned by this
front's task group.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.calls import ScopeStepUp
from agentify.backends.exchange import ExchangedAuth, Exchanger
from agentify.backends.logs import LogSink
from agentify.backends.people import PeopleFront
from agentify.backends.principal_flow import VaultFlowTokens
from agentify.backends.principal_tokens import VaultTokens
from agentify.backends.questions import Answerer
from agentify.backends.remote import RemoteConnection
from agentify.backends.state import BackendState, BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor, Wiring
from agentify.backends.url_authorization import ask_by_url, guarded, never_accepted
from agentify.config import BackendConfig, ExchangeSettings
from agentify.errors import BackendUnavailable, NeedsAuth
from agentify.team.identity import Identity
from agentify.team.principal import LOCAL, current_principal, inbound_token

_R = Any


@dataclass(eq=False)
class _Person:
    supervisor: Supervisor
    tokens: VaultTokens | None  # None: the backend's token is exchanged (`exchange.py`), kept by the exchanger
    used: float


class PrincipalBackend(PeopleFront[_Person]):
    """The front of one `perPrincipal` backend; safe to call from any task, like every supervisor."""

    most_people = 256

    def __init__(self, spec: BackendConfig, wiring: Wiring, identity: Identity | None) -> None:
        if not isinstance(spec.auth, ExchangeSettings) and identity is None:
            raise ValueError("a perPrincipal OAuth backend needs the vault (Identity)")
        lazy = spec.model_copy(update={"start": "lazy"})
        forgotten = identity.forgotten if identity is not None else None
        super().__init__(spec, lazy, RemoteConnection(lazy), StderrLog(spec.id), wiring, forgotten)
        self._identity = identity
        self._exchanger = Exchanger(spec, wiring.secrets) if isinstance(spec.auth, ExchangeSettings) else None
        self.asks_by_url = self._exchanger is None  # an exchanged token is not the person's to authorize
        self._secrets = wiring.secrets

    # ----- the owner -----------------------------------------------------------------------------

    def status(self) -> BackendStatus:
        """What the caller sees: their own session's state (another person's is none of theirs), and the scope the
        backend asked them for, if a step-up is pending."""
        own = replace(super().status(), start="lazy")  # a person's call starts it, never the replica (readiness)
        person = self._people.get(current_principal() or LOCAL)
        if person is None:
            hint = "each person authorizes as themselves (auth.perPrincipal): your first call asks you to open a URL"
            return replace(own, last_error=hint)
        theirs = person.supervisor.status()
        error = theirs.last_error
        if person.tokens is not None and person.tokens.missing_scope():
            error = (
                f"asks you for the scope {person.tokens.wanted_scope()} (a step-up): the next call that needs it "
                "asks you to authorize it; other calls go on with your current authorization"
            )
        return replace(own, state=theirs.state, last_error=error, server=theirs.server, pid=None)

    # ----- calls -------------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult:
        """See `Supervisor.call`; the caller is asked to authorize first when they must.

        Raises:
            NeedsAuth: the client cannot open the URL for its user (the text holds it).
            Declined: the person declined to authorize.
            BackendUnavailable, BackendError, TaskTimeout, Denied; what the answerer raises (`AskingClient`).
        """
        with self._in_flight():
            person = await self.ready_for(answerer)
            if person.tokens is None:
                return await person.supervisor.call(tool, arguments, progress, answerer, logs)
            try:
                return await person.supervisor.call(tool, arguments, progress, answerer, logs)
            except ScopeStepUp:
                await self._step_up(person, person.tokens, tool, answerer)
            except BackendUnavailable:
                if person.supervisor.state is not BackendState.NEEDS_AUTH:
                    raise
                # The server refused this person's tokens, and a refresh did not help: they are asked again.
                await self._vault_call(person.tokens.drop_tokens())
                await self._authorize(person.tokens, answerer)
            try:
                return await person.supervisor.call(tool, arguments, progress, answerer, logs)
            except ScopeStepUp:
                granted = person.tokens.granted_scope() if person.tokens is not None else None
                raise never_accepted(self.spec.id, tool, granted) from None

    async def _step_up(self, person: _Person, tokens: VaultTokens, tool: str, answerer: Answerer | None) -> None:
        """A 403 `insufficient_scope`: the person authorizes again for the scopes granted plus the new one (the
        SDK's union, kept as the wanted scope), unless the tokens hold it already, which authorizing cannot fix.
        The session stays up: the person's other calls go on with the current tokens meanwhile."""
        if not tokens.missing_scope():
            # The vault holds tokens with that scope already (just authorized, perhaps through another call):
            # the session may still send older ones. It loads them again; a second refusal says it all.
            tokens.renew()
            return
        self._log.info("step-up: {} asks for the scope {}", tool, tokens.wanted_scope())
        await self._vault_call(tokens.save())  # the flow reads the wanted scope from the vault
        await self._authorize(tokens, answerer)

    async def request(self, request: types.ClientRequest, result_type: type[_R]) -> _R:
        """Resources, prompts and completions go to the caller's own session, once they have authorized."""
        with self._in_flight() as principal:
            person = await self._with_tokens(principal, None, ask=False)
            return await person.supervisor.request(request, result_type)

    async def live_tool(self, tool: str) -> types.Tool | None:
        """The tool as the caller's session listed it, when they have one ready; else as any session listed it
        (nobody is asked to authorize just to read an annotation)."""
        person = self._people.get(current_principal() or LOCAL)
        if person is not None and person.supervisor.state is BackendState.READY:
            return await person.supervisor.live_tool(tool)
        return self.listed_tool(tool)

    async def learn(self, answerer: Answerer | None) -> None:
        """The caller's session lists the tools (they authorize first if they must)."""
        with self._in_flight():
            person = await self.ready_for(answerer)
            await person.supervisor.live_tool("")

    async def ready_for(self, answerer: Answerer | None) -> _Person:
        """The caller's supervisor, with tokens in the vault: they are asked to authorize first if they have none
        (or lack a scope the backend asked for)."""
        return await self._with_tokens(current_principal() or LOCAL, answerer)

    async def _with_tokens(self, principal: str, answerer: Answerer | None, ask: bool = True) -> _Person:
        """The principal's running supervisor, made only once they have tokens: someone who never authorized holds
        no place among `maxPeople` (nor makes anyone else's room). Without tokens they are asked to authorize
        (`ask`), or refused with `NeedsAuth`."""
        known = self._people.get(principal)
        tokens: VaultTokens | None = None
        if self._exchanger is not None:
            await self._exchanger.ensure(principal, inbound_token())
        else:
            assert self._identity is not None
            tokens = known.tokens if known is not None else None
            tokens = tokens or VaultTokens(self._inner_spec, principal, self._identity.vault, self._secrets)
            if not (await self._vault_call(tokens.load())).get("tokens"):
                if not ask:
                    raise NeedsAuth(
                        f"backend {self.spec.id!r} is reached as each person: call one of its tools first to authorize"
                    )
                await self._authorize(tokens, answerer)
        return self._person(principal, tokens)

    def _person(self, principal: str, tokens: VaultTokens | None) -> _Person:
        """The principal's supervisor; a new one (room made first) with `tokens` is started at once."""
        person = self._people.get(principal)
        if person is None:
            if self._tg is None:
                raise BackendUnavailable(f"backend {self.spec.id!r} is stopping; try again")
            self._make_room()
            if self._exchanger is not None:
                connection = RemoteConnection(self._inner_spec, auth=ExchangedAuth(self._exchanger, principal))
            else:
                connection = RemoteConnection(self._inner_spec, self._secrets, tokens=tokens)
            stderr = StderrLog(self.spec.id)
            supervisor = self._supervisor_for(connection, stderr, self._changes_of(principal))
            person = _Person(supervisor, tokens, time.monotonic())
            self._people[principal] = person
            self._started(supervisor)
        person.used = time.monotonic()
        return person

    def _forgot(self, principal: str) -> None:
        """Their exchanged token goes too."""
        if self._exchanger is not None:
            self._exchanger.drop(principal)

    # ----- authorizing ----------------------------------------------------------------------------------

    async def _authorize(self, tokens: VaultTokens, answerer: Answerer | None) -> None:
        assert self._identity is not None and self._tg is not None
        identity = self._identity

        def flow_store() -> VaultFlowTokens:
            store = VaultFlowTokens(self._inner_spec, tokens.principal, identity.vault, self._secrets)
            return store.redirected(identity.callback_url())

        await ask_by_url(
            self._inner_spec,
            identity,
            self._tg,
            tokens.principal,
            answerer,
            flow_store=flow_store,
            authorized=lambda: self._authorized_meanwhile(tokens),
            wanted=tokens.wanted_scope(),
        )
        await self._vault_call(tokens.load())

    async def _authorized_meanwhile(self, tokens: VaultTokens) -> bool:
        """Whether the vault holds tokens with every scope wanted (another call's authorization completed)."""
        record = await self._vault_call(tokens.load())
        return bool(record.get("tokens")) and not tokens.missing_scope()

    async def _vault_call(self, awaitable: Any) -> Any:
        """Vault and flow errors as the contract's: the backend is unavailable for now."""
        return await guarded(self.spec.id, awaitable)
