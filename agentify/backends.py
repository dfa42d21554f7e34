"""BackendManager: the backend MCP servers, each with one owning task for its session.

A backend's session (process + `ClientSession`) is entered and exited by its owner task
only (the anyio rule); callers reach it through `Backend.call`. The owner starts the
process, initialises, lists tools, then waits for one of: the process dying, a
`tools/list_changed` notification (it lists again), or a stop. A backend that died or
never started is restarted on its next use, after an exponential backoff.

Raises (from `call`): `BackendUnavailable`, `BackendError`, `TaskTimeout`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from loguru import logger
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agentify import __version__
from agentify.backend_state import SETTLED, STARTING, TRANSITIONS, BackendState, BackendStatus
from agentify.config import BackendConfig
from agentify.errors import BackendError, BackendUnavailable, Denied, TaskTimeout
from agentify.stderr_log import StderrLog
from agentify.transport import BackendProcess, spawn_backend

StateListener = Callable[[BackendStatus], None]

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds alive after which the backoff starts over


_TOOL_VERSIONS = itertools.count(1)  # global, so a replaced backend never reuses a version


class Backend:
    """One backend server. Public methods are safe to call from any task."""

    def __init__(self, spec: BackendConfig, on_state: StateListener | None = None) -> None:
        self.spec = spec
        self.state = BackendState.STOPPED
        self.tools: list[types.Tool] = []
        self.tools_version = 0  # bumped whenever `tools` is replaced, so catalogs know when to rebuild
        self.restarts = 0
        self.last_error: str | None = None
        self.stderr = StderrLog(spec.id)
        self._on_state = on_state
        self._session: ClientSession | None = None
        self._process: BackendProcess | None = None
        self._state_changed = anyio.Event()
        self._wake = anyio.Event()
        self._stopped = anyio.Event()
        self._refresh = anyio.Event()
        self._closing = False
        self._backoff = 0.0
        self._next_start_at = 0.0
        self._log = logger.bind(backend=spec.id)

    # ----- what callers use ------------------------------------------------------------------

    def status(self) -> BackendStatus:
        return BackendStatus(
            id=self.spec.id,
            description=self.spec.description,
            state=self.state,
            pid=self._process.pid if self._process and self.state is BackendState.READY else None,
            tools=tuple(t.name for t in self.tools),
            restarts=self.restarts,
            last_error=self.last_error,
            stderr_tail=tuple(self.stderr.tail),
        )

    async def _wait_while(self, busy: Callable[[], bool], seconds: float) -> None:
        """Waits, at most `seconds`, until `busy()` is false; re-checked on every state change and on stop."""
        with anyio.move_on_after(seconds):
            while busy() and not self._closing:
                await self._state_changed.wait()

    async def wait_settled(self, seconds: float | None = None) -> None:
        """Waits (bounded) until this backend is ready or has failed; returns at once if it is disabled."""
        limit = seconds if seconds is not None else self.spec.startup_timeout_seconds + 1
        await self._wait_while(lambda: self.spec.enabled and self.state not in SETTLED, limit)

    async def ready_session(self) -> ClientSession:
        """The live session; starts or restarts the backend first when needed (bounded wait).

        Raises:
            BackendUnavailable: it is disabled, shutting down, or could not be started in time.
        """
        if not self.spec.enabled:
            raise BackendUnavailable(
                f"backend {self.spec.id!r} is disabled in the configuration; set enabled to true to use it"
            )
        if self.state is not BackendState.READY and not self._closing:
            self._wake.set()
            backoff_left = max(0.0, self._next_start_at - time.monotonic())
            attempted = False

            def starting() -> bool:
                # Until ready, or until a start attempt seen here has failed.
                nonlocal attempted
                attempted = attempted or self.state in STARTING
                return not self._is_ready() and not (attempted and self.state is BackendState.FAILED)

            await self._wait_while(starting, backoff_left + self.spec.startup_timeout_seconds + 1)
        if not self._is_ready() or self._session is None:
            detail = f": {self.last_error}" if self.last_error else ""
            raise BackendUnavailable(
                f"backend {self.spec.id!r} is not available ({self.state.value}){detail}. "
                f"Check its command and arguments with `agentify doctor`; it is retried on the next call."
            )
        return self._session

    def kick(self) -> None:
        """Asks a failed backend to start again (after its backoff) without waiting for it."""
        if self.spec.enabled and not self._closing and self.state is BackendState.FAILED:
            self._wake.set()

    def _set_tools(self, tools: list[types.Tool]) -> None:
        self.tools = tools
        self.tools_version = next(_TOOL_VERSIONS)

    def _is_ready(self) -> bool:
        return self.state is BackendState.READY

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """Calls one tool with the backend's timeout. Cancelling the caller cancels the backend's call.

        Raises:
            BackendUnavailable, BackendError, TaskTimeout.
        """
        if not self.spec.tools.permits(tool):
            raise Denied(f"{self.spec.id}.{tool} is not allowed by tools.allow / tools.deny of the backend's config")
        session = await self.ready_session()
        if self._process is not None and self._process.stdout_closed.is_set():
            # It died after the last call and the owner has not noticed yet: let it restart first.
            await self._wait_while(self._is_ready, 2.0)
            session = await self.ready_session()
        timeout = self.spec.timeout_seconds
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
        try:
            with anyio.fail_after(timeout):
                return await session.send_request(request, types.CallToolResult, progress_callback=progress)
        except TimeoutError:
            raise TaskTimeout(
                f"{self.spec.id}.{tool} did not answer within {timeout:g} s and was cancelled. "
                f"If it needs longer, raise timeoutSeconds for backend {self.spec.id!r} in the config."
            ) from None
        except ValidationError as exc:
            raise BackendError(
                f"backend {self.spec.id!r} answered the call to {tool} with a malformed result: "
                f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}"
            ) from exc
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                code = await self._process.wait_exit(1.0) if self._process else None
                raise BackendError(
                    f"backend {self.spec.id!r} exited during the call to {tool}"
                    + (f" (exit code {code})" if code is not None else "")
                    + f"; it will be restarted on the next call. {self.stderr.hint()}"
                ) from exc
            raise BackendError(
                f"backend {self.spec.id!r} rejected the call to {tool}: {exc.error.message} (code {exc.error.code})"
            ) from exc

    # ----- the owner task -----------------------------------------------------------------------

    async def own(self) -> None:
        """Runs for the manager's lifetime: every session of this backend is entered and left here."""
        if self.spec.enabled:
            self._wake.set()
        while not self._closing:
            await self._wake.wait()
            if self._closing:
                break
            self._wake = anyio.Event()
            delay = self._next_start_at - time.monotonic()
            if delay > 0:
                with anyio.move_on_after(delay):
                    await self._stopped.wait()
                if self._closing:
                    break
            started = time.monotonic()
            await self._run_session()
            alive = time.monotonic() - started
            self._backoff = 0.0 if alive > STABLE_AFTER else min(BACKOFF_MAX, max(BACKOFF_FIRST, self._backoff * 2))
            self._next_start_at = time.monotonic() + self._backoff
        self._set_state(BackendState.STOPPED)

    def stop(self) -> None:
        self._closing = True
        self._stopped.set()
        self._wake.set()
        self._refresh.set()
        self._state_changed.set()

    async def _run_session(self) -> None:
        first = self.state is BackendState.STOPPED and self.restarts == 0 and self.last_error is None
        if not first:
            self.restarts += 1
        self._set_state(BackendState.STARTING if first else BackendState.RESTARTING)
        spec = self.spec
        self._log.info("starting: {} {}", spec.command, " ".join(spec.args))
        failure: str | None = None
        try:
            async with AsyncExitStack() as stack:
                try:
                    process = await stack.enter_async_context(
                        spawn_backend(spec.command, spec.args, spec.env, spec.cwd, self.stderr.line)
                    )
                except OSError as exc:
                    raise _SpawnFailed(
                        f"cannot start {spec.command!r}: {exc.strerror or exc} (cwd {spec.cwd})"
                    ) from exc
                self._process = process
                session = await stack.enter_async_context(
                    ClientSession(
                        process.read_stream,
                        process.write_stream,
                        message_handler=self._on_message,
                        client_info=types.Implementation(name="agentify", version=__version__),
                    )
                )
                failure = await self._initialise(session, process)
                if failure is not None:
                    # Say so before the (bounded, seconds long) stop of the process below, so that
                    # callers waiting on this start see the reason, not "starting".
                    self._fail(failure)
                    failure = None
                else:
                    self._session = session
                    self.last_error = None
                    self._set_state(BackendState.READY)
                    failure = await self._serve(session, process)
        except _SpawnFailed as exc:
            failure = str(exc)
        except Exception as exc:  # the owner task must survive anything a backend does
            self._log.opt(exception=exc).error("backend session failed unexpectedly")
            failure = f"unexpected failure: {type(exc).__name__}: {exc}"
        finally:
            self._session = None
        if failure is not None:
            self._fail(failure)

    async def _initialise(self, session: ClientSession, process: BackendProcess) -> str | None:
        """Initialize and list tools; returns why it failed, or None."""
        timeout = self.spec.startup_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                await session.initialize()
                self._set_tools(await self._list_tools(session))
        except TimeoutError:
            return (
                f"did not finish initialize and tools/list within {timeout:g} s "
                f"(raise startupTimeoutSeconds if it needs longer). {self.stderr.hint()}"
            )
        except MCPError as exc:
            code = await process.wait_exit(1.0)
            reason = f"exited with code {code}" if code is not None else f"failed: {exc.error.message}"
            return f"{reason} during start-up. {self.stderr.hint()}"
        self._log.info("ready: {} tools", len(self.tools))
        return None

    async def _serve(self, session: ClientSession, process: BackendProcess) -> str | None:
        """Serves until the process dies (returns why) or the backend is stopped (returns None)."""
        while not self._closing:
            async with anyio.create_task_group() as tg:

                async def on_exit() -> None:
                    await process.stdout_closed.wait()
                    tg.cancel_scope.cancel()

                async def on_refresh() -> None:
                    await self._refresh.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(on_exit)
                tg.start_soon(on_refresh)
            if process.stdout_closed.is_set():
                code = await process.wait_exit(1.0)
                return f"exited (code {code}); restarted on the next call. {self.stderr.hint()}"
            if not self._closing:
                self._refresh = anyio.Event()  # a notification during the listing below lists again
                try:
                    with anyio.fail_after(self.spec.startup_timeout_seconds):
                        self._set_tools(await self._list_tools(session))
                    self._log.info("tools changed: now {} tools", len(self.tools))
                    self._emit_state()
                except (TimeoutError, MCPError) as exc:
                    self._log.warning("listing tools again failed: {}", exc)
        return None

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.send_request(types.ListToolsRequest(params=params), types.ListToolsResult)
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                break
        return [t for t in tools if self.spec.tools.permits(t.name)]

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh.set()
        elif isinstance(message, Exception):
            self._log.warning("unreadable message from the backend: {}", str(message)[:300])

    def _fail(self, message: str) -> None:
        self.last_error = message
        self._log.warning("failed: {}", message)
        self._set_state(BackendState.FAILED)

    def _set_state(self, new: BackendState) -> None:
        if new is self.state:
            return
        if new not in TRANSITIONS[self.state]:
            raise RuntimeError(f"backend {self.spec.id}: illegal state change {self.state.value} -> {new.value}")
        self.state = new
        changed, self._state_changed = self._state_changed, anyio.Event()
        changed.set()
        self._emit_state()

    def _emit_state(self) -> None:
        if self._on_state is not None:
            self._on_state(self.status())


class _SpawnFailed(Exception):
    pass


class BackendManager:
    """Starts every backend concurrently in the background and owns their tasks."""

    def __init__(self, specs: Iterable[BackendConfig], on_state: StateListener | None = None) -> None:
        self._on_state = on_state
        self.backends: dict[str, Backend] = {s.id: Backend(s, on_state) for s in specs}
        self._tg: TaskGroup | None = None
        self.closed = anyio.Event()
        self._stopping = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Owns the backends until cancelled or `close` is called; every backend starts at once."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for backend in self.backends.values():
                    tg.start_soon(backend.own)
                task_status.started()
                await self._stopping.wait()
        finally:  # also when cancelled (a signal): open_gateway waits for this
            self._tg = None
            self.closed.set()

    def reconcile(self, specs: Iterable[BackendConfig]) -> None:
        """Applies a new backend list: removed or changed backends stop, new ones start."""
        assert self._tg is not None, "reconcile needs a running manager"
        wanted = {s.id: s for s in specs}
        for backend_id, backend in list(self.backends.items()):
            if wanted.get(backend_id) != backend.spec:
                backend.stop()
                del self.backends[backend_id]
        for backend_id, spec in wanted.items():
            if backend_id not in self.backends:
                backend = Backend(spec, self._on_state)
                self.backends[backend_id] = backend
                self._tg.start_soon(backend.own)

    def get(self, backend_id: str) -> Backend:
        try:
            return self.backends[backend_id]
        except KeyError:
            known = ", ".join(sorted(self.backends)) or "none"
            raise BackendUnavailable(f"there is no backend {backend_id!r}; configured: {known}") from None

    def statuses(self) -> list[BackendStatus]:
        return [b.status() for b in self.backends.values()]

    async def wait_all_settled(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as tg:
                for backend in self.backends.values():
                    if backend.spec.enabled:
                        tg.start_soon(backend.wait_settled, seconds)

    def close(self) -> None:
        """Asks every owner to close its session; `run` returns once they have."""
        for backend in self.backends.values():
            backend.stop()
        self._stopping.set()
