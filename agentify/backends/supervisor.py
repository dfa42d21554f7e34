"""The supervisor of one backend: the owner of its session's lifetime, its restarts and its published state.

Every session (connection + `ClientSession`) is entered and left by `run`, the one owner task (the anyio
rule). The owner starts when there is demand (at once for an eager backend, on the first call for a lazy
one), initialises, lists tools, then waits for one of: the link going away, a `tools/list_changed`
notification (it lists again), the idle time running out, or a stop. A backend that died or never started
is started again on its next use, after an exponential backoff (`starts.py`: who asks, who waits).

The backend's state is its `Lifecycle` (illegal transitions raise); only the owner changes it, but for
`kick`'s NEEDS_AUTH -> RESTARTING. Why a session failed is typed (`failures.py`) and translated in one
place (`failures.mapped`); what its end means for the backend is `endings.py`'s, what a refused credential
leads to `AuthRecovery`'s, the tools are `ToolSet`'s, and a call's way to the live session is `CallPath`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, AsyncExitStack, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from loguru import logger
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT

from agentify.backends.auth_recovery import AuthRecovery
from agentify.backends.backoff import Backoff
from agentify.backends.call_path import CallPath
from agentify.backends.calls import unavailable
from agentify.backends.connection import Connection, Link
from agentify.backends.endings import Verdict, ended_by, failed, link_lost
from agentify.backends.era import Era
from agentify.backends.failures import (
    AuthRequired,
    SessionFailure,
    StartRejected,
    StartTimeout,
    WrongEra,
    WrongTransport,
    mapped,
)
from agentify.backends.handles import ToolHandle
from agentify.backends.idle import IdleClock
from agentify.backends.logs import LogListener, LogSink
from agentify.backends.manifest import ManifestStore
from agentify.backends.oauth import SecretSink
from agentify.backends.offers import BackendOffers, ChangeListener, change_of
from agentify.backends.pool import LANE_IDLE_SECONDS, Lanes
from agentify.backends.questions import Answerer, InFlight
from agentify.backends.routes import ResourceRoutes
from agentify.backends.session import (
    RootsGetter,
    client_session,
    listening,
    send_roots_changed,
    server_line,
    set_log_level,
    start,
)
from agentify.backends.starts import Starts
from agentify.backends.state import ENDED_BADLY, SETTLED, STARTING, BackendState, BackendStatus, Lifecycle
from agentify.backends.stderr_log import StderrLog
from agentify.backends.toolset import ToolSet
from agentify.config import BackendConfig
from agentify.pinning import PinBook, refusal

StateListener = Callable[[BackendStatus], None]


@dataclass(frozen=True)
class Wiring:
    """What the manager hands every backend: the manifests, the redactor's sink, and where it reports or asks."""

    manifests: ManifestStore
    secrets: SecretSink | None = None
    on_state: StateListener | None = None
    roots: RootsGetter | None = None
    routes: ResourceRoutes | None = None
    on_change: ChangeListener | None = None
    on_log: LogListener | None = None
    pins: PinBook | None = None


_R = TypeVar("_R", bound=types.Result)

SETTLE_SLACK = 1.0  # a waiter's margin over the start-up timeout, so it sees the owner's verdict


class Supervisor:
    """One backend. Public methods are safe to call from any task."""

    personal = False
    """True where each principal has a session of their own (`PrincipalBackend`): what it lists and says is theirs."""
    asks_by_url = False
    """True where a call that meets the server's request for authorization asks the person from their IDE to open
    a page (`url_authorization.py`), rather than leaving it to `agentify auth`."""

    def __init__(
        self,
        spec: BackendConfig,
        connection: Connection,
        stderr: StderrLog,
        manifests: ManifestStore,
        on_state: StateListener | None = None,
        roots: RootsGetter | None = None,
        routes: ResourceRoutes | None = None,
        on_change: ChangeListener | None = None,
        on_log: LogListener | None = None,
        pins: PinBook | None = None,
        more: Callable[[], Connection] | None = None,
    ) -> None:
        """`more` opens the connection of one more session, when calls overlap (`pool.py`); None: one session."""
        self.spec = spec
        self.connection = connection
        self.stderr = stderr
        self.restarts = 0
        self.last_error: str | None = None
        self.server: str | None = None
        self.tools = ToolSet(spec, manifests, self, pins)
        self._pins = pins
        self.offers = BackendOffers(spec, manifests, routes or ResourceRoutes())
        self._manifests = manifests
        self._more = more
        self._lanes = Lanes(spec.id, spec.max_sessions, spec.timeout_seconds, self._extra if more else None)
        self._on_change = on_change
        self._on_log = on_log
        self.person: str | None = None
        """Whose sessions these are, for a backend run as each person (`people.py`): the pins judge their listings
        as that person's."""
        self._log_level: types.LoggingLevel | None = None  # what logging/setLevel says; the backend's own until set
        learning = spec.start == "lazy" and not self.tools.from_manifest  # started once, only to learn the tools
        self._idle = IdleClock(spec.idle_stop_seconds, learning=learning)
        lazy_and_known = spec.start == "lazy" and not learning
        self._lifecycle = Lifecycle(BackendState.IDLE if lazy_and_known else BackendState.STOPPED, self._publish)
        self._auth = AuthRecovery(spec, connection)
        self._starts = Starts(self._lifecycle)
        self._on_state = on_state
        self._roots = roots if spec.forward_roots else None
        self._era = Era(spec)
        self._questions = InFlight(spec.id)
        self._reopen = anyio.Event()  # set when the era fell back: the live session ends and a new one starts
        self._restart = anyio.Event()  # set by `restart`: the live session ends and a new one starts at once
        self._session: ClientSession | None = None
        self._link: Link | None = None
        self._calls = CallPath(
            spec=spec,
            acquire=self._acquire,
            reopen=self._ask_reopen,
            start_limit=self.start_limit,
            idle=self._idle,
            era=self._era,
            questions=self._questions,
            stderr_hint=stderr.hint,
            auth=self._auth,
            routes=self.offers.routes,
            roots=self._roots,
        )
        self._log = logger.bind(backend=spec.id)

    # ----- what callers use ------------------------------------------------------------------

    @property
    def state(self) -> BackendState:
        return self._lifecycle.state

    @property
    def start_limit(self) -> float:
        """The start-up timeout: the one place it is read."""
        return self.spec.startup_timeout_seconds

    def status(self) -> BackendStatus:
        link = self._link
        return BackendStatus(
            id=self.spec.id,
            description=self.spec.description,
            state=self.state,
            pid=link.pid if link is not None and self.state is BackendState.READY else None,
            extra_pids=tuple(pid for extra in self._lanes.extras if (pid := extra.status().pid) is not None),
            tools=tuple(t.name for t in self.tools.tools),
            restarts=self.restarts,
            last_error=self.last_error,
            stderr_tail=tuple(self.stderr.tail),
            enabled=self.spec.enabled,
            url=self.spec.where() if self.spec.remote else None,
            start=self.spec.start,
            server=self.server,
            **self._pin_notes(),
        )

    def _pin_notes(self) -> dict[str, tuple[tuple[str, str], ...]]:
        held = self.tools.held()
        if not held:
            return {}
        notes = tuple((self.tools.shown_name(h.tool), h.reason) for h in held.values())
        return {"withheld": notes} if self.tools.withheld() else {"flagged": notes}

    def handles(self) -> tuple[ToolHandle, ...]:
        return self.tools.handles()

    def settling(self) -> bool:
        """Whether a catalog should wait for this backend: it is starting (or learning its tools)."""
        return self.spec.enabled and self.state not in SETTLED

    async def wait_settled(self, seconds: float | None = None) -> None:
        """Waits (bounded) until this backend is ready, idle or has failed; at once if disabled."""
        limit = seconds if seconds is not None else self.start_limit + SETTLE_SLACK
        await self._starts.wait_while(lambda: self.spec.enabled and self.state not in SETTLED, limit)

    def kick(self) -> None:
        """Asks for a start, without waiting, where no call would ever ask: a backend that failed before it was
        ever ready in this run (the planner cannot choose its tools), and one that needed authorization and
        has new credentials now (`agentify auth` was run)."""
        if not self.spec.enabled or self._starts.stopping.is_set():
            return
        if self.state is BackendState.FAILED and not self.tools.listed:
            self._starts.ask()
        elif self.state is BackendState.NEEDS_AUTH and self._auth.has_new_credentials():
            self._lifecycle.enter(BackendState.RESTARTING)  # so a catalog waits for the attempt
            self._starts.ask()

    def restart(self) -> bool:
        """Ends the live session and starts a new one at once (a person asked: the console's button), counted as a
        restart; a backend that is not running is started. No backoff either way. False when it cannot restart:
        disabled, stopping, or already starting."""
        if not self.spec.enabled or self._starts.stopping.is_set() or self.state in STARTING:
            return False
        self._restart.set()
        for extra in self._lanes.extras:
            if extra.state is BackendState.READY:
                extra.restart()
        self._idle.touch()  # a person wants it up: it stays until its idle time, like after a call
        self._starts.backoff = Backoff()  # asked by a person: at once, whatever failed before
        self._starts.ask()
        return True

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> types.CallToolResult:
        """Calls one tool, starting the backend first if needed; `answerer` answers the backend's questions,
        `logs` hears its log messages meanwhile (`call_path.py`).

        Raises:
            Denied, BackendUnavailable, BackendError, TaskTimeout; ToolChanged when the extra session it gets lists
            the tool changed under `pinning: enforce`; what the answerer raises (`questions.py`).
        """
        async with self._lanes.lease() as extra:  # a session of its own, so what the backend says is this call's
            if extra is not None:
                await extra.live_tool(tool)  # another process: its own listing, judged by the pins as the owner's
                if (held := extra.tools.withheld().get(tool)) is not None:
                    raise refusal(held, f"{self.spec.id}__{self.tools.shown_name(tool)}")
                return await extra.call(tool, arguments, progress, answerer, logs)
            return await self._calls.call(tool, arguments, progress, answerer, logs)

    async def request(self, request: types.ClientRequest, result_type: type[_R]) -> _R:
        """A request beside tool calls (resources, prompts, completions), starting the backend first if needed.

        Raises:
            MCPError (the backend's own refusal), BackendUnavailable, BackendError, TaskTimeout.
        """
        return await self._calls.request(request, result_type)

    def listed_tool(self, tool: str) -> types.Tool | None:
        """The tool the backend calls `tool`, as a session of this run listed it; None before any did (the manifest
        may only plan)."""
        if not self.tools.listed:
            return None
        return self.tools.by_origin(tool)

    async def live_tool(self, tool: str) -> types.Tool | None:
        """`listed_tool`, starting the backend first when no session of this run has listed its tools.

        Raises:
            BackendUnavailable.
        """
        if not self.tools.listed:
            await self._acquire()
        return self.listed_tool(tool)

    async def send_roots_changed(self) -> None:
        """Tells a live session that forwards roots that they changed; nothing when not running."""
        if (session := self._session) is not None and self.spec.forward_roots:
            await send_roots_changed(session, self._log)
        for extra in self._lanes.extras:
            await extra.send_roots_changed()

    async def send_log_level(self, level: types.LoggingLevel) -> None:
        """The level a live 2025-11-25 session logs at, from now on and after every restart (`logs.py`)."""
        self._log_level = level
        if (session := self._session) is not None:
            await set_log_level(session, level, self._log)
        for extra in self._lanes.extras:
            await extra.send_log_level(level)

    def stop(self) -> None:
        self._starts.stop()
        self._idle.wake()

    async def _acquire(self) -> tuple[ClientSession, Link]:
        """The live session and link; starts or restarts the backend first (bounded wait)."""
        self._idle.touch()  # somebody uses it now: it stays up until idle
        link = self._link
        if self.state is BackendState.READY and link is not None and link.gone.is_set():
            # The link is gone and the owner is ending the session: wait for its verdict, then restart.
            await self._starts.wait_while(lambda: self.state is BackendState.READY, self.start_limit)
        if self.spec.enabled and self.state is not BackendState.READY and not self._starts.stopping.is_set():
            if self.state is BackendState.NEEDS_AUTH and not self._auth.has_new_credentials():
                raise unavailable(self.spec, self.state.value, self.last_error)  # nothing new to try
            await self._starts.tried(self.start_limit + SETTLE_SLACK)
        session, link = self._session, self._link
        if self.state is not BackendState.READY or session is None or link is None:
            raise unavailable(self.spec, self.state.value, self.last_error)
        return session, link

    def _ask_reopen(self) -> None:
        self._reopen.set()

    # ----- the owner task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Runs for the manager's lifetime: every session of this backend is entered and left here."""
        if self.spec.enabled and (self.spec.start == "eager" or self._idle.learning):
            self._starts.ask()
        async with self._lanes.serving():  # the extra sessions' owners, stopped with this one
            while await self._starts.next():
                began = time.monotonic()
                await self._attempt()
                self._starts.backoff.after(self.state in ENDED_BADLY, time.monotonic() - began)
        self._lifecycle.enter(BackendState.STOPPED)

    def _extra(self) -> Supervisor:
        """The supervisor of one more session, for calls only: started by its first call, stopped when idle."""
        assert self._more is not None
        idle = min(self.spec.idle_stop_seconds or LANE_IDLE_SECONDS, LANE_IDLE_SECONDS)
        spec = self.spec.model_copy(update={"start": "lazy", "idle_stop_seconds": idle, "max_sessions": 1})
        extra = Supervisor(
            spec,
            self._more(),
            self.stderr,
            self._manifests.read_only(),  # the owner's session records the tools and offers
            roots=self._roots,
            routes=self.offers.routes,  # a link in a result it carries makes this backend the URI's owner too
            on_log=self._on_log,
            pins=self._pins,
        )
        extra.tools.owner = False  # its listing is judged by the pins, the owner's stays the backend's
        extra.person = self.person
        extra._log_level = self._log_level
        return extra

    async def _attempt(self) -> None:
        """One start attempt: sessions until one ends for good (ready and then ended, or failed)."""
        # A start after a failure is a restart; RESTARTING already is one, entered by `kick` or by `_serve` when a
        # restart was asked for (a backend that was not running just starts).
        self._restart = anyio.Event()
        if self.state in ENDED_BADLY or self.state is BackendState.RESTARTING:
            self.restarts += 1
            self._lifecycle.enter(BackendState.RESTARTING)
        else:
            self._lifecycle.enter(BackendState.STARTING)
        while await self._session_once() and not self._starts.stopping.is_set():
            pass  # the transport fell back, or a refreshed token may help: start again within this attempt

    async def _session_once(self) -> bool:
        """One session, from opening the link to its end; True when it should start again at once."""
        self._log.info("starting ({}): {}", self.connection.kind, self.spec.where())
        ended: str | None = None
        try:
            with mapped(self.connection.failure):
                async with AsyncExitStack() as stack:
                    link = await stack.enter_async_context(self.connection.open())
                    self._link = link
                    session = await stack.enter_async_context(
                        client_session(link, self._on_message, self._roots, self._questions, self._on_log_message)
                    )
                    try:
                        tools = await start(
                            session, link, self.connection, self._era, self.start_limit, self.stderr.hint
                        )
                    except (StartTimeout, StartRejected) as failure:
                        # Said before the (bounded, seconds long) stop of the process below, so that
                        # callers waiting on this start see the reason, not "starting".
                        return self._settle(failed(failure, self._log))
                    await self.offers.learn(session, self.start_limit)  # before READY: what waits sees them
                    # Listening before READY too: a change right after the first call is heard.
                    await stack.enter_async_context(listening(session))
                    await self.offers.resubscribe(session, self.start_limit)  # after a restart
                    self._ready(session, tools)
                    self.offers.keep()
                    await set_log_level(session, self._log_level, self._log)
                    await self._serve(session, link)
            return False
        except SessionFailure as failure:
            if not isinstance(failure, WrongTransport | WrongEra | AuthRequired):
                ended = str(failure)
            return self._settle(
                ended_by(failure, self.state, self.spec, self._auth, self._log, by_url=self.asks_by_url)
            )
        finally:
            self._session = None
            if self._link is not None:
                self._link.lost_reason = self._link.lost_reason or ended
                self._link.gone.set()  # wakes callers whose call failed with the connection
            self._link = None

    def _settle(self, verdict: Verdict) -> bool:
        """Applies what a session's end means (`endings.py`); True when a session should start again at once."""
        if verdict.error is not None:
            self.last_error = verdict.error
        if verdict.state is not None:
            self._lifecycle.enter(verdict.state)
        return verdict.again

    def _ready(self, session: ClientSession, tools: list[types.Tool]) -> None:
        with self._listing():
            self.tools.replace(tools)
        self._log.info("ready: {} tools", len(self.tools.tools))
        self._session = session
        self.last_error = None
        self.server = server_line(session.server_info)
        self._auth.session_ready()
        self._lifecycle.enter(BackendState.READY)

    async def _serve(self, session: ClientSession, link: Link) -> None:
        """Serves until the backend idles or is stopped (returns), or its link goes away.

        Raises:
            LinkLost: why, with what happens next.
            AuthRequired: the link ended because the server refused the credentials (HTTP 401).
        """
        while not self._starts.stopping.is_set():
            stopping, restart = self._starts.stopping, self._restart
            events = (link.gone, self.tools.stale, self.offers.stale, stopping, self._reopen, restart)
            idle = await self._idle.expired_or(events)
            if link.gone.is_set():
                raise await link_lost(link, self.stderr.hint)
            if self._restart.is_set():
                self._log.info("restarting: asked for")  # said before the (bounded) stop of the session
                self._session = None
                self._lifecycle.enter(BackendState.RESTARTING)
                return
            if self._reopen.is_set():
                self._reopen = anyio.Event()
                raise WrongEra("reopening the session in the 2025-11-25 protocol")
            if idle:
                if not self._idle.expired_now():
                    continue  # a call took the session while the idle wait was ending
                self._log.info("idle: stopping until the next call")  # said before the (bounded) stop
                self._session = None
                self._lifecycle.enter(BackendState.IDLE)
                return
            if self.tools.stale.is_set() and not self._starts.stopping.is_set():
                with self._listing():
                    again = await self.tools.list_again(session, self.start_limit)
                if again:
                    self._lifecycle.changed()
            if self.offers.stale.is_set() and not self._starts.stopping.is_set():
                await self.offers.learn(session, self.start_limit)
                self.offers.keep()

    def _listing(self) -> AbstractContextManager[None]:
        """What a session lists within is `person`'s listing, for the pins."""
        if self._pins is None or self.person is None:
            return nullcontext()
        return self._pins.listing_as(self.person)

    async def _on_message(self, message: Any) -> None:
        change = change_of(self.spec.id, message)
        if change is not None:
            if change.kind == "tools":
                self.tools.stale.set()
            elif change.kind != "resource":  # one resource's update changes no list
                self.offers.stale.set()
            if self._on_change is not None:
                self._on_change(change)
        elif isinstance(message, Exception):
            self._log.warning("unreadable message from the backend: {}", str(message)[:300])

    async def _on_log_message(self, params: types.LoggingMessageNotificationParams) -> None:
        if not self._questions.log(params) and self._on_log is not None:
            self._on_log(self.spec.id, params)

    def _publish(self) -> None:
        if self._on_state is not None:
            self._on_state(self.status())
