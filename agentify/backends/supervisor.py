"""The supervisor of one backend: the owner of its session's lifetime, its restarts and its published state.

Every session (connection + `ClientSession`) is entered and left by `run`, the one owner task
(the anyio rule). The owner starts when there is demand (at once for an eager backend, on the
first call for a lazy one), initialises, lists tools, then waits for one of: the link going
away (the connection signals it), a `tools/list_changed` notification (it lists again), the
idle time running out, or a stop. A backend that died or never started is started again on its
next use, after an exponential backoff.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from mcp import MCPDeprecationWarning
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from agentify._common.errors import first
from agentify.backends.calls import call_tool, refused, unavailable
from agentify.backends.connection import AuthRequired, Connection, Link, WrongTransport
from agentify.backends.handles import ToolHandle
from agentify.backends.idle import IdleClock
from agentify.backends.manifest import ManifestStore
from agentify.backends.session import RootsGetter, client_session, list_tools, start
from agentify.backends.state import SETTLED, STARTING, TRANSITIONS, BackendState, BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable, Denied

StateListener = Callable[[BackendStatus], None]

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds alive after which the backoff starts over
SETTLE_SLACK = 1.0  # a waiter's margin over the start-up timeout, so it sees the owner's verdict

_TOOL_VERSIONS = itertools.count(1)  # global, so a replaced backend never reuses a version


class Supervisor:
    """One backend. Public methods are safe to call from any task."""

    def __init__(
        self,
        spec: BackendConfig,
        connection: Connection,
        stderr: StderrLog,
        manifests: ManifestStore,
        on_state: StateListener | None = None,
        roots: RootsGetter | None = None,
    ) -> None:
        self.spec = spec
        self.connection = connection
        self.stderr = stderr
        self.restarts = 0
        self.last_error: str | None = None
        self._manifests = manifests
        self._on_state = on_state
        self._roots = roots
        known = manifests.load(spec)
        self.tools: list[types.Tool] = self._permitted(known or [])
        self.tools_version = next(_TOOL_VERSIONS)
        self._learn = spec.start == "lazy" and known is None  # start once, only to learn the tools
        self.state = BackendState.IDLE if spec.start == "lazy" and not self._learn else BackendState.STOPPED
        self._handles: tuple[int, tuple[ToolHandle, ...]] = (0, ())
        self._session: ClientSession | None = None
        self._link: Link | None = None
        self._changed = anyio.Event()
        self._demand = anyio.Event()
        self._refresh = anyio.Event()
        self._stopped = anyio.Event()
        self._closing = False
        self._ever_ready = False
        self._refresh_tried = False  # a refused token was refreshed once since the last ready session
        self._auth_stamp = 0.0
        self._clean_end = True  # the last session ended on purpose (idle), so the next start is no restart
        self._idle = IdleClock()
        self._backoff = 0.0
        self._next_start_at = 0.0
        self._log = logger.bind(backend=spec.id)

    # ----- what callers use ------------------------------------------------------------------

    @property
    def start_limit(self) -> float:
        """The start-up timeout: the one place it is read."""
        return self.spec.startup_timeout_seconds

    @property
    def idle_limit(self) -> float | None:
        """Seconds without calls after which the session stops (None: never)."""
        return 0.0 if self._learn else self.spec.idle_stop_seconds

    def status(self) -> BackendStatus:
        link = self._link
        return BackendStatus(
            id=self.spec.id,
            description=self.spec.description,
            state=self.state,
            pid=link.pid if link is not None and self.state is BackendState.READY else None,
            tools=tuple(t.name for t in self.tools),
            restarts=self.restarts,
            last_error=self.last_error,
            stderr_tail=tuple(self.stderr.tail),
            enabled=self.spec.enabled,
            url=self.spec.where() if self.spec.remote else None,
            start=self.spec.start,
        )

    def handles(self) -> tuple[ToolHandle, ...]:
        version, handles = self._handles
        if version != self.tools_version:
            spec = self.spec
            handles = tuple(ToolHandle(spec.id, spec.description, tool, spec, self) for tool in self.tools)
            self._handles = (self.tools_version, handles)
        return handles

    def settling(self) -> bool:
        """Whether a catalog should wait for this backend: it is starting (or learning its tools)."""
        return self.spec.enabled and self.state not in SETTLED

    async def wait_settled(self, seconds: float | None = None) -> None:
        """Waits (bounded) until this backend is ready, idle or has failed; at once if disabled."""
        limit = seconds if seconds is not None else self.start_limit + SETTLE_SLACK
        await self._wait_while(lambda: self.spec.enabled and self.state not in SETTLED, limit)

    def kick(self) -> None:
        """Asks for a start, without waiting, where no call would ever ask: a backend that failed before it was
        ever ready in this run (the planner cannot choose its tools), and one that needed authorization and
        has new credentials now (`agentify auth` was run)."""
        if not self.spec.enabled or self._closing:
            return
        if self.state is BackendState.FAILED and not self._ever_ready:
            self._demand.set()
        elif self.state is BackendState.NEEDS_AUTH and self.connection.auth_stamp() != self._auth_stamp:
            self._set_state(BackendState.RESTARTING)  # so a catalog waits for the attempt
            self._demand.set()

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """Calls one tool, starting the backend first if needed.

        Raises:
            Denied, BackendUnavailable, BackendError, TaskTimeout.
        """
        if not self.spec.tools.permits(tool):
            raise Denied(f"{self.spec.id}.{tool} is not allowed by tools.allow / tools.deny of the backend's config")
        session, link = await self._acquire()
        try:
            return await self._call_on(session, link, tool, arguments, progress)
        except BackendUnavailable:
            if not (self.spec.oauth and link.refused_status == 401):
                raise
        # The server refused the access token before running the call: once refreshed, call again.
        with anyio.move_on_after(self.start_limit):
            await link.gone.wait()  # the owner ends that session, then starts one that refreshes the token
        session, link = await self._acquire()
        return await self._call_on(session, link, tool, arguments, progress)

    async def _call_on(
        self, session: ClientSession, link: Link, tool: str, arguments: dict[str, Any], progress: ProgressFnT | None
    ) -> types.CallToolResult:
        self._idle.begin()
        try:
            return await call_tool(session, link, self.spec, tool, arguments, progress, self.stderr.hint())
        finally:
            self._idle.end()

    async def send_roots_changed(self) -> None:
        """Tells a live session that forwards roots that they changed; nothing when not running."""
        session = self._session
        if session is not None and self.spec.forward_roots:
            try:
                with warnings.catch_warnings():  # deprecated only in the 2026-07-28 era; backends use 2025-11-25
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await session.send_roots_list_changed()
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                self._log.warning("could not send roots/list_changed: {}", exc)

    def stop(self) -> None:
        self._closing = True
        for event in (self._stopped, self._demand, self._refresh, self._changed):
            event.set()
        self._idle.wake()

    async def _acquire(self) -> tuple[ClientSession, Link]:
        """The live session and link; starts or restarts the backend first (bounded wait)."""
        self._learn = False  # somebody uses it now: it stays up until idle
        self._idle.touch()
        link = self._link
        if self.state is BackendState.READY and link is not None and link.gone.is_set():
            # The link is gone and the owner is ending the session: wait for its verdict, then restart.
            await self._wait_while(lambda: self.state is BackendState.READY, self.start_limit)
        if self.spec.enabled and self.state is not BackendState.READY and not self._closing:
            if self.state is BackendState.NEEDS_AUTH and self.connection.auth_stamp() == self._auth_stamp:
                raise unavailable(self.spec, self.state.value, self.last_error)  # nothing new to try
            self._demand.set()
            backoff_left = max(0.0, self._next_start_at - time.monotonic())
            attempted = False

            def starting() -> bool:
                # Until ready, or until a start attempt seen here has failed.
                nonlocal attempted
                attempted = attempted or self.state in STARTING
                ended = self.state in (BackendState.FAILED, BackendState.NEEDS_AUTH)
                return self.state is not BackendState.READY and not (attempted and ended)

            await self._wait_while(starting, backoff_left + self.start_limit + SETTLE_SLACK)
        session, link = self._session, self._link
        if self.state is not BackendState.READY or session is None or link is None:
            raise unavailable(self.spec, self.state.value, self.last_error)
        return session, link

    async def _wait_while(self, busy: Callable[[], bool], seconds: float) -> None:
        """Waits, at most `seconds`, until `busy()` is false; re-checked on every state change and on stop."""
        with anyio.move_on_after(seconds):
            while busy() and not self._closing:
                await self._changed.wait()

    # ----- the owner task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Runs for the manager's lifetime: every session of this backend is entered and left here."""
        if self.spec.enabled and (self.spec.start == "eager" or self._learn):
            self._demand.set()
        while not self._closing:
            await self._demand.wait()
            if self._closing:
                break
            self._demand = anyio.Event()
            delay = self._next_start_at - time.monotonic()
            if delay > 0:
                with anyio.move_on_after(delay):
                    await self._stopped.wait()
                if self._closing:
                    break
            started = time.monotonic()
            await self._run_session()
            if self._clean_end:
                self._backoff = 0.0
            elif time.monotonic() - started > STABLE_AFTER:
                self._backoff = 0.0
            else:
                self._backoff = min(BACKOFF_MAX, max(BACKOFF_FIRST, self._backoff * 2))
            self._next_start_at = time.monotonic() + self._backoff
        self._set_state(BackendState.STOPPED)

    async def _run_session(self) -> None:
        restart = not self._clean_end
        if restart:
            self.restarts += 1
        self._clean_end = False
        self._set_state(BackendState.RESTARTING if restart else BackendState.STARTING)
        self._log.info("starting ({}): {}", self.connection.kind, self.spec.where())
        failure: str | None = None
        try:
            async with AsyncExitStack() as stack:
                link = await stack.enter_async_context(self.connection.open())
                self._link = link
                roots = self._roots if self.spec.forward_roots else None
                session = await stack.enter_async_context(client_session(link, self._on_message, roots))
                started = await start(session, link, self.connection, self.start_limit, self.stderr.hint)
                if isinstance(started, str):
                    failure = started
                    # Say so before the (bounded, seconds long) stop of the process below, so that
                    # callers waiting on this start see the reason, not "starting".
                    self._fail(failure)
                    failure = None
                else:
                    self._set_tools(started)
                    self._log.info("ready: {} tools", len(self.tools))
                    self._session = session
                    self.last_error = None
                    self._ever_ready = True
                    self._refresh_tried = False
                    self._set_state(BackendState.READY)
                    failure = await self._serve(session, link)
        except Exception as exc:  # the owner task must survive anything a backend or its transport does
            failure = self._ended_by(exc)
        finally:
            self._session = None
            if self._link is not None:
                self._link.lost_reason = self._link.lost_reason or failure
                self._link.gone.set()  # wakes callers whose call failed with the connection
            self._link = None
        if failure is not None:
            self._fail(failure)
        elif self.state is BackendState.READY:  # left on purpose while ready: stopping or idle
            self._set_state(BackendState.STOPPED if self._closing else BackendState.IDLE)

    def _ended_by(self, exc: Exception) -> str | None:
        """What an exception out of a session means: a state to enter (None) or a failure to report."""
        if first(exc, WrongTransport) is not None:
            self._log.info("the server does not speak streamable HTTP; trying the SSE transport")
            self._clean_end = True
            self._demand.set()
            return None
        if first(exc, AuthRequired) is not None:
            if not self.spec.oauth:
                return refused(self.spec).message
            if not self._refresh_tried and self.connection.retry_auth():
                self._log.info("the server refused the access token; refreshing it")
                self._refresh_tried = True
                self._clean_end = True
                self._demand.set()
                return None
            self._needs_auth()
            return None
        explanation = self.connection.explain(exc)
        if explanation.startswith("unexpected"):  # a bug or a case nobody foresaw: keep the traceback
            self._log.opt(exception=exc).error("backend session failed: {}", explanation)
        return explanation

    def _needs_auth(self) -> None:
        self.last_error = f"the server asks for authorization: run `agentify auth {self.spec.id}`"
        self._auth_stamp = self.connection.auth_stamp()
        self._log.warning("needs authorization: run `agentify auth {}`", self.spec.id)
        self._set_state(BackendState.NEEDS_AUTH)

    async def _serve(self, session: ClientSession, link: Link) -> str | None:
        """Serves until the link goes away (returns why), the backend idles or is stopped (returns None)."""
        while not self._closing:
            idle = False
            async with anyio.create_task_group() as tg:

                async def until(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                async def until_idle() -> None:
                    nonlocal idle
                    await self._idle.expired(lambda: self.idle_limit)
                    idle = True
                    tg.cancel_scope.cancel()

                tg.start_soon(until, link.gone)
                tg.start_soon(until, self._refresh)
                tg.start_soon(until, self._stopped)
                tg.start_soon(until_idle)
            if link.gone.is_set():
                if link.exit_code is not None:
                    code = await link.exit_code()
                    return f"exited (code {code}); restarted on the next call. {self.stderr.hint()}"
                return f"{link.lost_reason or 'the connection closed'}; reconnected on the next call"
            if idle or self._closing:
                self._clean_end = True
                if idle:  # say so before the (bounded) stop, as a failure is
                    self._log.info("idle: stopping until the next call")
                    self._session = None
                    self._set_state(BackendState.IDLE)
                return None
            self._refresh = anyio.Event()  # a notification during the listing below lists again
            try:
                with anyio.fail_after(self.start_limit):
                    self._set_tools(await list_tools(session))
                self._log.info("tools changed: now {} tools", len(self.tools))
                self._emit_state()
            except (TimeoutError, MCPError) as exc:
                self._log.warning("listing tools again failed: {}", exc)
        return None

    def _permitted(self, tools: list[types.Tool]) -> list[types.Tool]:
        return [t for t in tools if self.spec.tools.permits(t.name)]

    def _set_tools(self, tools: list[types.Tool]) -> None:
        self._manifests.save(self.spec, tools)
        self.tools = self._permitted(tools)
        self.tools_version = next(_TOOL_VERSIONS)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh.set()
        elif isinstance(message, Exception):
            self._log.warning("unreadable message from the backend: {}", str(message)[:300])

    def _fail(self, message: str) -> None:
        self.last_error = message
        self._log.warning("failed: {}", message)
        self._set_state(BackendState.FAILED)

    def _set_state(self, state: BackendState) -> None:
        if state is self.state:
            return
        if state not in TRANSITIONS[self.state]:
            self._log.error("unexpected state change {} -> {}", self.state.value, state.value)
        self.state = state
        self._emit_state()

    def _emit_state(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        if self._on_state is not None:
            self._on_state(self.status())
