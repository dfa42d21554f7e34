"""A stdio backend that runs as each person, with their own secrets (`${person:NAME}` in its `env`).

The backend (this front) is one entry of the catalog; its tools are whatever any person's process listed (kept in
the manifest). Behind it, each principal has an inner `Supervisor` whose processes get that person's secrets in
their environment: they start on the person's first call, stop when idle, and the person's calls that overlap
get processes of their own as any backend's do (`pool.py`). At most `maxPeople` (32) people have processes; the
least recently used one with nothing in flight makes room (`people.py`).

A person with no secrets in the vault yet is first asked, in agentify's own words, to open the gateway's page
(URL-mode elicitation, `url_authorization.ask_and_wait`, in both protocol eras; never a form elicitation, which
the MCP specification forbids for secrets): `/oauth/start/<id>` answers a form of password fields whose values
go straight into the person's vault record (`team/secret_pages.py`), and the call goes on.
A person whose vault record is dropped (their token removed from the tokens file, `agentify vault forget`) or
changed has their processes stopped within `WATCH_SECONDS`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.calls import unavailable
from agentify.backends.logs import LogSink
from agentify.backends.people import PeopleFront
from agentify.backends.questions import Answerer
from agentify.backends.state import BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.backends.stdio import StdioConnection
from agentify.backends.supervisor import Supervisor, Wiring
from agentify.backends.url_authorization import MAX_ROUNDS, UrlQuestion, ask_and_wait, guarded
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable, NeedsAuth
from agentify.team.identity import Identity
from agentify.team.principal import LOCAL, current_principal

WATCH_SECONDS = 2.0  # how often the people's vault records are read again (dropped or changed: processes stop)


@dataclass(eq=False)
class _Person:
    supervisor: Supervisor
    secrets: dict[str, str]
    used: float


class PersonalBackend(PeopleFront[_Person]):
    """The front of one stdio backend with `${person:NAME}` in its env; safe to call from any task."""

    def __init__(self, spec: BackendConfig, wiring: Wiring, identity: Identity) -> None:
        lazy = spec.model_copy(update={"start": "lazy"})
        stderr = StderrLog(spec.id)
        super().__init__(spec, lazy, StdioConnection(lazy, stderr), stderr, wiring, identity.forgotten)
        self._identity = identity

    # ----- the owner -----------------------------------------------------------------------------

    async def _beside(self) -> None:
        """Reads the people's vault records again every `WATCH_SECONDS`: dropped or changed, their processes stop."""
        while True:
            await anyio.sleep(WATCH_SECONDS)
            for principal, person in list(self._people.items()):
                try:
                    current = await self._stored(principal)
                except BackendUnavailable:
                    continue  # the vault is out of reach: nothing is known to have changed
                if current != person.secrets and self._people.get(principal) is person:
                    self._log.info("a person's secrets were dropped or changed: their processes stop")
                    self._drop(principal)

    def status(self) -> BackendStatus:
        """What the caller sees: their own processes' state (another person's is none of theirs)."""
        own = replace(super().status(), start="lazy")
        person = self._people.get(current_principal() or LOCAL)
        if person is None:
            hint = "runs as each person with their own secrets: your first call asks you to open a page for them"
            return replace(own, last_error=hint)
        theirs = person.supervisor.status()
        return replace(own, state=theirs.state, last_error=theirs.last_error, server=theirs.server, pid=None)

    # ----- calls -------------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult:
        """See `Supervisor.call`; the caller is asked for their secrets first when the vault has none.

        Raises:
            NeedsAuth: the client cannot open the page for its user (the text holds its URL).
            Declined: the person declined to open it.
            BackendUnavailable, BackendError, TaskTimeout, Denied; what the answerer raises (`AskingClient`).
        """
        with self._in_flight():
            person = await self.ready_for(answerer)
            return await person.supervisor.call(tool, arguments, progress, answerer, logs)

    async def request(self, request: types.ClientRequest, result_type: type[Any]) -> Any:
        """Resources, prompts and completions go to the caller's own processes, once they gave their secrets."""
        with self._in_flight() as principal:
            stored = await self._stored(principal)
            if stored is None:
                raise NeedsAuth(
                    f"backend {self.spec.id!r} runs as each person with their own secrets: call one of its tools "
                    "first to give yours"
                )
            return await self._person(principal, stored).supervisor.request(request, result_type)

    async def live_tool(self, tool: str) -> types.Tool | None:
        person = self._people.get(current_principal() or LOCAL)
        if person is not None:
            return await person.supervisor.live_tool(tool)
        return self.listed_tool(tool)

    async def learn(self, answerer: Answerer | None) -> None:
        """The caller's process lists the tools (they give their secrets first if they must)."""
        with self._in_flight():
            person = await self.ready_for(answerer)
            await person.supervisor.live_tool("")

    async def ready_for(self, answerer: Answerer | None) -> _Person:
        """The caller's supervisor, with their secrets from the vault: asked for on the page first if there are
        none (or not every one the backend names)."""
        if not self.spec.enabled:
            raise unavailable(self.spec, "stopped", None)  # says it is disabled, before anyone is asked anything
        principal = current_principal() or LOCAL
        stored = await self._stored(principal)
        if stored is None:
            await self._ask(principal, answerer)
            stored = await self._stored(principal)
            if stored is None:
                raise BackendUnavailable(f"backend {self.spec.id!r}: your secrets were not kept; call again")
        return self._person(principal, stored)

    async def _stored(self, principal: str) -> dict[str, str] | None:
        """The principal's secrets as the vault holds them now: every one the backend names, else None."""
        record = await guarded(self.spec.id, self._identity.vault.load(principal, self.spec.id))
        kept = record.get("secrets") if record else None
        if not isinstance(kept, dict):
            return None
        values = {name: kept.get(name) for name in self.spec.personal_secrets}
        if not all(isinstance(value, str) and value for value in values.values()):
            return None
        return {name: str(value) for name, value in values.items()}

    def _person(self, principal: str, stored: dict[str, str]) -> _Person:
        person = self._people.get(principal)
        if person is not None and person.secrets != stored:
            self._drop(principal)  # they gave new secrets: processes with the old ones stop
            person = None
        if person is None:
            if self._tg is None:
                raise BackendUnavailable(f"backend {self.spec.id!r} is stopping; try again")
            self._make_room()
            if self._wiring.secrets is not None:
                self._wiring.secrets(stored.values())  # masked wherever the gateway writes or relays text
            stderr = StderrLog(self.spec.id)
            spec = self._inner_spec
            supervisor = self._supervisor_for(
                StdioConnection(spec, stderr, stored),
                stderr,
                self._changes_of(principal),
                more=lambda: StdioConnection(spec, stderr, stored),
            )
            person = _Person(supervisor, stored, time.monotonic())
            self._people[principal] = person
            self._started(supervisor)
        person.used = time.monotonic()
        return person

    # ----- asking for the secrets ------------------------------------------------------------------------

    async def _ask(self, principal: str, answerer: Answerer | None) -> None:
        """Sends the person to their page (the flow every round and replica shares) and waits for its answer."""
        backend = self.spec.id
        flows = self._identity.flows
        flow_id = await guarded(backend, flows.pending(principal, backend))
        if flow_id is None:
            flow_id = await guarded(backend, flows.create(principal, backend, self.spec.personal_secrets))
        url = self._identity.start_url(flow_id)
        names = ", ".join(self.spec.personal_secrets)
        question = UrlQuestion(
            backend=backend,
            url=url,
            elicitation_id=f"agentify-secret-{flow_id[:24]}",
            message=f"{backend} runs as you with your own {names}: open the page and give it there.",
            again="Not given yet: fill in the page, then go on",
            cannot_open=f"backend {backend!r} runs as you with your own {names}, and your client cannot open a page "
            f"for you. Open this URL in your browser (it works once, for 10 minutes), give them there, then call "
            f"again: {url}",
            declined=f"giving your {names} for backend {backend!r} was declined: the call was not made",
            unanswered=f"the page for your {names} (backend {backend!r}) was not answered after {MAX_ROUNDS} checks. "
            f"Fill it in at {url} (it works once, for 10 minutes), then call again.",
            failed=f"backend {backend!r}",
        )
        await ask_and_wait(answerer, flows, flow_id, question, self.spec.timeout_seconds)
