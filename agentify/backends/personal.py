"""A stdio backend that runs as each person, with their own secrets (`${person:NAME}` in its `env`).

The backend (this front) is one entry of the catalog; its tools are whatever any person's process listed (kept in
the manifest). Behind it, each principal has an inner `Supervisor` whose processes get that person's secrets in
their environment: they start on the person's first call, stop when idle, and the person's calls that overlap
get processes of their own as any backend's do (`pool.py`). At most `MAX_PEOPLE` people have processes; the
least recently used one with no call in flight makes room.

A person with no secrets in the vault yet is first asked to open the gateway's page (URL-mode elicitation,
through the relay every backend question takes, so both protocol eras get it; never a form elicitation, which
the MCP specification forbids for secrets): `/oauth/start/<id>` answers a form of password fields whose values
go straight into the person's vault record (`team/secret_pages.py`), and the call goes on:
- 2025-11-25: `elicitation/create`; the call waits for the page (bounded by the backend's timeout), then goes
  on, and the client is told `notifications/elicitation/complete`;
- 2026-07-28: the round ends with the question; the client's next round carries the answer; if the page was not
  answered by then, the answer is another round (at most `MAX_ROUNDS`);
- a client that cannot open a URL for its user gets `needs_auth` with the URL in the text.
A person whose vault record is dropped (their token removed from the tokens file, `agentify vault forget`) or
changed has their processes stopped within `WATCH_SECONDS`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from loguru import logger
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.calls import unavailable
from agentify.backends.logs import LogSink
from agentify.backends.manifest import ManifestStore
from agentify.backends.oauth import SecretSink
from agentify.backends.offers import ChangeListener
from agentify.backends.questions import Answerer
from agentify.backends.routes import ResourceRoutes
from agentify.backends.session import RootsGetter
from agentify.backends.state import BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.backends.stdio import StdioConnection
from agentify.backends.supervisor import StateListener, Supervisor
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable, Declined, NeedsAuth
from agentify.team.flows import FlowStoreUnavailable, Outcome, polled
from agentify.team.identity import Identity
from agentify.team.principal import LOCAL, current_principal
from agentify.team.vault import VaultUnavailable

INNER_IDLE_SECONDS = 600.0  # a person's processes stop after this long unused (unless idleStopSeconds says less)
MAX_PEOPLE = 32
MAX_ROUNDS = 5  # 2026-07-28 rounds one call asks before it gives up waiting for the page
ROUND_WAIT_SECONDS = 10.0  # how long a 2026-07-28 round waits for the page to be answered before asking again
WATCH_SECONDS = 2.0  # how often the people's vault records are read again (dropped or changed: processes stop)


@dataclass(eq=False)
class _Person:
    supervisor: Supervisor
    secrets: dict[str, str]
    used: float
    busy: int = 0


class PersonalBackend(Supervisor):
    """The front of one stdio backend with `${person:NAME}` in its env; safe to call from any task."""

    def __init__(
        self,
        spec: BackendConfig,
        manifests: ManifestStore,
        identity: Identity,
        *,
        secrets: SecretSink | None = None,
        on_state: StateListener | None = None,
        roots: RootsGetter | None = None,
        routes: ResourceRoutes | None = None,
        on_change: ChangeListener | None = None,
    ) -> None:
        lazy = spec.model_copy(update={"start": "lazy"})
        stderr = StderrLog(spec.id)
        super().__init__(lazy, StdioConnection(lazy, stderr), stderr, manifests, on_state, roots, routes)
        self.spec = spec
        idle = min(spec.idle_stop_seconds or INNER_IDLE_SECONDS, 3600)
        self._inner_spec = spec.model_copy(update={"start": "lazy", "idle_stop_seconds": idle})
        self._manifests = manifests
        self._identity = identity
        self._redactor = secrets
        self._inner_roots = roots
        self._inner_routes = routes
        self._inner_change = on_change
        self._people: dict[str, _Person] = {}
        identity.forgotten.append(self._forget)
        self._tg: TaskGroup | None = None
        self._level: types.LoggingLevel | None = None
        self._log = logger.bind(backend=spec.id)

    # ----- the owner -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Owns every person's supervisor until stopped; reads their vault records again every `WATCH_SECONDS`."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            watching = anyio.CancelScope()
            tg.start_soon(self._watch, watching)
            await self._starts.stopping.wait()
            watching.cancel()
            if self._forget in self._identity.forgotten:
                self._identity.forgotten.remove(self._forget)
            for person in self._people.values():
                person.supervisor.stop()
            tg.cancel_scope.deadline = anyio.current_time() + self.start_limit + 5  # bounded, whatever hangs
        self._tg = None

    async def _watch(self, scope: anyio.CancelScope) -> None:
        with scope:
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

    def kick(self) -> None:
        return None  # nothing starts without a person

    def settling(self) -> bool:
        return False

    async def wait_settled(self, seconds: float | None = None) -> None:
        return None

    def status(self) -> BackendStatus:
        """What the caller sees: their own processes' state (another person's is none of theirs)."""
        own = replace(super().status(), start="lazy")
        person = self._people.get(current_principal() or LOCAL)
        if person is None:
            hint = "runs as each person with their own secrets: your first call asks you to open a page for them"
            return replace(own, last_error=hint)
        theirs = person.supervisor.status()
        return replace(own, state=theirs.state, last_error=theirs.last_error, server=theirs.server, pid=None)

    async def send_log_level(self, level: types.LoggingLevel) -> None:
        self._level = level
        for person in list(self._people.values()):
            await person.supervisor.send_log_level(level)

    async def send_roots_changed(self) -> None:
        for person in list(self._people.values()):
            await person.supervisor.send_roots_changed()

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
        person = await self.ready_for(answerer)
        person.busy += 1
        try:
            return await person.supervisor.call(tool, arguments, progress, answerer, logs)
        finally:
            person.busy -= 1
            person.used = time.monotonic()

    async def request(self, request: types.ClientRequest, result_type: type[Any]) -> Any:
        """Resources, prompts and completions go to the caller's own processes, once they gave their secrets."""
        principal = current_principal() or LOCAL
        stored = await self._stored(principal)
        if stored is None:
            raise NeedsAuth(
                f"backend {self.spec.id!r} runs as each person with their own secrets: call one of its tools first "
                "to give yours"
            )
        return await self._person(principal, stored).supervisor.request(request, result_type)

    async def live_tool(self, tool: str) -> types.Tool | None:
        person = self._people.get(current_principal() or LOCAL)
        if person is not None:
            return await person.supervisor.live_tool(tool)
        return self.listed_tool(tool)

    async def learn(self, answerer: Answerer | None) -> None:
        """The caller's process lists the tools (they give their secrets first if they must)."""
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
        try:
            record = await self._identity.vault.load(principal, self.spec.id)
        except VaultUnavailable as exc:
            raise BackendUnavailable(f"backend {self.spec.id!r}: {exc}") from None
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
            if self._redactor is not None:
                self._redactor(stored.values())  # masked wherever the gateway writes or relays text
            stderr = StderrLog(self.spec.id)
            supervisor = Supervisor(
                self._inner_spec,
                StdioConnection(self._inner_spec, stderr, stored),
                stderr,
                self._manifests,
                on_state=self._inner_state,
                roots=self._inner_roots,
                routes=self._inner_routes,
                on_change=self._inner_change,
                on_log=None,  # a log message no call owns is this person's process's: it reaches nobody else
                more=lambda: StdioConnection(self._inner_spec, stderr, stored),
            )
            supervisor.tools = self.tools  # what any person's process lists is the backend's catalog entry
            person = _Person(supervisor, stored, time.monotonic())
            self._people[principal] = person
            self._tg.start_soon(supervisor.run)
            if self._level is not None:
                self._tg.start_soon(supervisor.send_log_level, self._level)
        person.used = time.monotonic()
        return person

    def _make_room(self) -> None:
        if len(self._people) < MAX_PEOPLE:
            return
        idle = [(p.used, principal) for principal, p in self._people.items() if p.busy == 0]
        if not idle:
            raise BackendUnavailable(
                f"backend {self.spec.id!r} runs processes for {MAX_PEOPLE} people with calls in flight, its most; "
                "try again in a moment"
            )
        self._drop(min(idle)[1])

    def _drop(self, principal: str) -> None:
        person = self._people.pop(principal, None)
        if person is not None:
            person.supervisor.stop()

    def _forget(self, principals: set[str]) -> None:
        """Their tokens were removed: their processes stop now."""
        for principal in principals:
            self._drop(principal)

    def _inner_state(self, status: BackendStatus) -> None:
        self._lifecycle.changed()  # the catalog and the console hear of it as of this backend

    # ----- asking for the secrets ------------------------------------------------------------------------

    async def _ask(self, principal: str, answerer: Answerer | None) -> None:
        """Sends the person to their page (the flow every round and replica shares) and waits for its answer."""
        flows = self._identity.flows
        try:
            flow_id = await flows.pending(principal, self.spec.id)
            if flow_id is None:
                flow_id = await flows.create(principal, self.spec.id, self.spec.personal_secrets)
        except FlowStoreUnavailable as exc:
            raise BackendUnavailable(f"backend {self.spec.id!r}: {exc}") from None
        url = self._identity.start_url(flow_id)
        names = ", ".join(self.spec.personal_secrets)
        round_trips = bool(getattr(answerer, "round_trips", False))
        elicitation_id = f"agentify-secret-{flow_id[:24]}"
        outcome: Outcome | None = None
        for round_number in range(MAX_ROUNDS):
            message = f"{self.spec.id} runs as you with your own {names}: open the page and give it there."
            if round_number:
                message += f" (Not given yet: fill in the page, then go on. Check {round_number + 1}.)"
            params = types.ElicitRequestURLParams(message=message, url=url, elicitation_id=elicitation_id)
            answers = (
                await answerer.answer(self.spec.id, {"authorize": types.ElicitRequest(params=params)})
                if answerer is not None
                else types.ErrorData(code=types.INVALID_REQUEST, message="no client to ask")
            )
            if isinstance(answers, types.ErrorData):
                raise NeedsAuth(
                    f"backend {self.spec.id!r} runs as you with your own {names}, and your client cannot open a page "
                    f"for you. Open this URL in your browser (it works once, for 10 minutes), give them there, then "
                    f"call again: {url}"
                )
            answer = answers.get("authorize")
            if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
                raise Declined(f"giving your {names} for backend {self.spec.id!r} was declined: the call was not made")
            outcome = await self._outcome(flow_id, ROUND_WAIT_SECONDS if round_trips else self.spec.timeout_seconds)
            if outcome is not None:
                break
        if outcome is None:
            raise NeedsAuth(
                f"the page for your {names} (backend {self.spec.id!r}) was not answered after {MAX_ROUNDS} checks. "
                f"Fill it in at {url} (it works once, for 10 minutes), then call again."
            )
        if outcome.error is not None:
            raise BackendUnavailable(f"backend {self.spec.id!r}: {outcome.error}. Call again to retry.")
        completed = getattr(answerer, "completed", None)
        if completed is not None and not round_trips:
            await completed(elicitation_id)

    async def _outcome(self, flow_id: str, seconds: float) -> Outcome | None:
        flows = self._identity.flows
        with anyio.move_on_after(seconds):
            try:
                outcome: Outcome = await polled(lambda: flows.outcome(flow_id))
            except FlowStoreUnavailable as exc:
                raise BackendUnavailable(f"backend {self.spec.id!r}: {exc}") from None
            return outcome
        return None
