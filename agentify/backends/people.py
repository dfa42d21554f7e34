"""The front of a backend where each person has a supervisor of their own (`per_principal.py`: a remote backend
reached as each person; `personal.py`: a stdio backend run with each person's own secrets).

The front is one entry of the catalog: what any person's session listed is its tools, and a person's supervisor's
state reaches the catalog and the console as the front's. Nothing starts without a person: the front's own
supervisor is never started (it is lazy, kicked by nobody, settled at once); each person's starts on their first
call, and the log level a client sets, and a change of roots, reach every person's. At most `maxPeople` people have
a supervisor at once; the least recently used one with no call or request in flight (one asking them to
authorize or for their secrets included) makes room: nobody's read is stopped under them to let another in.
Whoever's session listed them, the tools are judged by the pins as this one backend's (`PinBook.each_person`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from loguru import logger

from agentify.backends.connection import Connection
from agentify.backends.offers import ChangeListener
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor, Wiring
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable
from agentify.team.principal import LOCAL, current_principal

Forgotten = Callable[[set[str]], None]
"""A listener the vault tells whose records were removed (`Identity.forgotten`)."""

INNER_IDLE_SECONDS = 600.0  # a person's sessions stop after this long unused (unless idleStopSeconds says less)


class Person(Protocol):
    supervisor: Supervisor
    used: float
    """When they last used it (`time.monotonic`): the least recently used makes room first."""


P = TypeVar("P", bound=Person)


class PeopleFront(Supervisor, Generic[P]):
    """What both fronts share; `_people` holds each principal's `P` (their supervisor, and what the front keeps of
    them). `_tg` is the front's owner task group while it runs (its `run` sets it)."""

    personal = True
    most_people = 32
    """How many people have a supervisor at once when `maxPeople` does not say."""

    def __init__(
        self,
        spec: BackendConfig,
        lazy: BackendConfig,
        connection: Connection,
        stderr: StderrLog,
        wiring: Wiring,
        forgotten: list[Forgotten] | None,
    ) -> None:
        """`lazy`: `spec` started lazily, which `connection` (the front's, never opened) was made for; `forgotten`:
        the vault's listeners (`Identity.forgotten`), told whose records were removed."""
        super().__init__(
            lazy, connection, stderr, wiring.manifests, wiring.on_state, wiring.roots, wiring.routes, pins=wiring.pins
        )
        if wiring.pins is not None:
            wiring.pins.each_person(spec.id)  # judged by one set of pins, whoever's session listed (until `run` ends)
        self._forgotten = forgotten
        if forgotten is not None:
            forgotten.append(self._forget)
        self.spec = spec
        idle = min(spec.idle_stop_seconds or INNER_IDLE_SECONDS, 3600)
        self._inner_spec = spec.model_copy(update={"start": "lazy", "idle_stop_seconds": idle})
        self._wiring = wiring
        self._people: dict[str, P] = {}
        self._busy: Counter[str] = Counter()  # principal -> their calls and requests in flight
        self._tg: TaskGroup | None = None
        self._level: types.LoggingLevel | None = None
        self._log = logger.bind(backend=spec.id)
        # What the manifest keeps of the resources and prompts is what one person's session listed: the lists are
        # asked of the caller's own session (only the capabilities are the backend's, the same for everyone).
        self.offers.offers = replace(self.offers.offers, complete=False)

    async def run(self) -> None:
        """Owns every person's supervisor, and what `_beside` does meanwhile, until stopped."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                beside = anyio.CancelScope()
                tg.start_soon(self._run_beside, beside)
                await self._starts.stopping.wait()
                beside.cancel()
                if self._forgotten is not None and self._forget in self._forgotten:
                    self._forgotten.remove(self._forget)
                for person in self._people.values():
                    person.supervisor.stop()
                tg.cancel_scope.deadline = anyio.current_time() + self.start_limit + 5  # bounded, whatever hangs
        finally:
            self._tg = None
            if self._wiring.pins is not None:
                self._wiring.pins.shared_again(self.spec.id)  # a reloaded config may make it one shared backend

    async def _run_beside(self, scope: anyio.CancelScope) -> None:
        with scope:
            await self._beside()

    async def _beside(self) -> None:
        """What the front does beside the people's supervisors while it runs (nothing; cancelled as it stops)."""
        return None

    def _forget(self, principals: set[str]) -> None:
        """Their vault records were removed (their token removed, `agentify vault forget`): what they have stops
        now, not when idle."""
        for principal in principals:
            self._drop(principal)
            self._forgot(principal)

    def _forgot(self, principal: str) -> None:
        """What else the front drops of a forgotten person (nothing but their supervisor)."""
        return None

    def _changes_of(self, principal: str) -> ChangeListener | None:
        """What a person's session says changed (a list, a subscribed resource) is theirs: it reaches only their
        clients (`Change.principal`)."""
        heard = self._wiring.on_change
        if heard is None:
            return None
        return lambda change: heard(replace(change, principal=principal))

    def kick(self) -> None:
        return None  # nothing starts without a person

    def settling(self) -> bool:
        return False

    async def wait_settled(self, seconds: float | None = None) -> None:
        return None

    async def send_log_level(self, level: types.LoggingLevel) -> None:
        self._level = level
        for person in list(self._people.values()):
            await person.supervisor.send_log_level(level)

    async def send_roots_changed(self) -> None:
        for person in list(self._people.values()):
            await person.supervisor.send_roots_changed()

    @contextmanager
    def _in_flight(self) -> Iterator[str]:
        """The caller's call or request runs (yields their principal): what they have is not stopped to make room."""
        principal = current_principal() or LOCAL
        self._busy[principal] += 1
        try:
            yield principal
        finally:
            self._busy[principal] -= 1
            if not self._busy[principal]:
                del self._busy[principal]
            if (person := self._people.get(principal)) is not None:
                person.used = time.monotonic()

    def _make_room(self) -> None:
        """Stops the least recently used person's supervisor with nothing in flight, when `maxPeople` have one.

        Raises:
            BackendUnavailable: every one of them has a call or request in flight.
        """
        most = self.spec.max_people or self.most_people
        if len(self._people) < most:
            return
        idle = [(p.used, principal) for principal, p in self._people.items() if not self._busy[principal]]
        if not idle:
            raise BackendUnavailable(
                f"backend {self.spec.id!r} serves {most} people with calls or reads in flight, its most "
                "(maxPeople): try again in a moment"
            )
        self._drop(min(idle)[1])

    def _drop(self, principal: str) -> None:
        """Stops the person's supervisor (their processes or session); their next call starts a new one."""
        person = self._people.pop(principal, None)
        if person is not None:
            person.supervisor.stop()

    def _supervisor_for(
        self,
        connection: Connection,
        stderr: StderrLog,
        on_change: ChangeListener | None,
        more: Callable[[], Connection] | None = None,
        person: str | None = None,
    ) -> Supervisor:
        """A supervisor for one person's sessions (`person`, the caller's principal unless said): it lists the
        front's tools, its state is the front's news."""
        supervisor = Supervisor(
            self._inner_spec,
            connection,
            stderr,
            self._wiring.manifests,
            on_state=lambda _status: self._lifecycle.changed(),
            roots=self._wiring.roots,
            routes=self._wiring.routes,
            on_change=on_change,
            on_log=None,  # a log message no call owns is this person's: it reaches nobody else
            pins=self._wiring.pins,  # their extra sessions are judged too
            more=more,
        )
        supervisor.tools = self.tools  # what any person's session lists is the backend's catalog entry
        supervisor.person = person or current_principal() or LOCAL  # the pins judge its listings as theirs
        supervisor.asks_by_url = self.asks_by_url
        return supervisor

    def _started(self, supervisor: Supervisor) -> None:
        """Runs a person's supervisor in the front's task group, at the log level a client set."""
        if self._tg is None:
            return
        self._tg.start_soon(supervisor.run)
        if self._level is not None:
            self._tg.start_soon(supervisor.send_log_level, self._level)
