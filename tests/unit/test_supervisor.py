"""The backend supervisor in process, through the `Connection` seam: a real MCP server over memory streams.

Each test reads what a user sees of a backend: its state as `list_backends` and the console show it
(recorded from the supervisor's state listener), its last error, its restart count, its tools, and
what a call returns or raises.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from agentify.backends.backoff import BACKOFF_FIRST, Backoff
from agentify.backends.failures import AuthRequired, WrongTransport
from agentify.backends.manifest import ManifestStore
from agentify.backends.state import BackendState, BackendStatus, IllegalTransition, Lifecycle
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor
from agentify.config import BackendConfig
from agentify.errors import BackendError, BackendUnavailable
from tests.fakes.memory_connection import MemoryConnection

pytestmark = pytest.mark.anyio

STARTING, READY, FAILED = BackendState.STARTING, BackendState.READY, BackendState.FAILED
RESTARTING, IDLE, STOPPED = BackendState.RESTARTING, BackendState.IDLE, BackendState.STOPPED
NEEDS_AUTH = BackendState.NEEDS_AUTH


class States:
    """Every state the backend showed, in order (a repeated one once), and a way to wait for one."""

    def __init__(self) -> None:
        self.seen: list[BackendState] = []
        self._changed = anyio.Event()

    def __call__(self, status: BackendStatus) -> None:
        if not self.seen or self.seen[-1] is not status.state:
            self.seen.append(status.state)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, supervisor: Supervisor, state: BackendState) -> None:
        await self.wait(lambda: supervisor.state is state)

    async def wait(self, condition: Callable[[], bool]) -> None:
        with anyio.fail_after(10):
            while not condition():
                await self._changed.wait()


def spec(**extra: Any) -> BackendConfig:
    return BackendConfig.model_validate({"id": "mem", "command": "memory", "startupTimeoutSeconds": 5} | extra)


def oauth_spec() -> BackendConfig:
    return BackendConfig.model_validate({"id": "mem", "url": "http://127.0.0.1:9/mcp", "auth": {"type": "oauth"}})


@asynccontextmanager
async def supervised(
    backend: BackendConfig, connection: MemoryConnection, manifests: ManifestStore | None = None
) -> AsyncIterator[tuple[Supervisor, States]]:
    states = States()
    stderr = StderrLog(backend.id)
    supervisor = Supervisor(backend, connection, stderr, manifests or ManifestStore(None), on_state=states)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervisor.run)
            try:
                yield supervisor, states
            finally:
                supervisor.stop()  # `run` returns once its session is closed


async def call(supervisor: Supervisor, tool: str) -> str:
    """Through the handle a plan carries."""
    handle = {h.tool.name: h for h in supervisor.handles()}[tool]
    return text(await handle.call({}))


async def call_by_name(supervisor: Supervisor, tool: str) -> str:
    """As a call_tool of a tool that was never listed in this run."""
    return text(await supervisor.call(tool, {}))


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_an_eager_backend_starts_lists_its_tools_answers_calls_and_stops() -> None:
    async with supervised(spec(), MemoryConnection()) as (supervisor, states):
        await states.until(supervisor, READY)
        assert supervisor.status().tools == ("echo", "grow")
        assert await call(supervisor, "echo") == "echo ran"
    assert states.seen == [STARTING, READY, STOPPED]
    assert supervisor.restarts == 0 and supervisor.last_error is None


async def test_a_backend_that_dies_fails_and_is_restarted_by_the_next_call() -> None:
    connection = MemoryConnection()
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        connection.drop()
        await states.until(supervisor, FAILED)
        assert supervisor.last_error == "the server left; reconnected on the next call"
        assert await call(supervisor, "echo") == "echo ran"
        assert supervisor.restarts == 1 and supervisor.last_error is None
    assert states.seen == [STARTING, READY, FAILED, RESTARTING, READY, STOPPED]
    assert connection.opens == 2


async def test_a_start_that_does_not_finish_in_time_fails_with_the_timeout_to_raise() -> None:
    connection = MemoryConnection(hang_listing=True)
    async with supervised(spec(startupTimeoutSeconds=0.2), connection) as (supervisor, states):
        await states.until(supervisor, FAILED)
        assert supervisor.last_error is not None
        assert supervisor.last_error.startswith("did not finish initialize and tools/list within 0.2 s")
        assert "startupTimeoutSeconds" in supervisor.last_error
    assert states.seen == [STARTING, FAILED, STOPPED]


async def test_an_unforeseen_error_fails_the_backend_and_the_gateway_keeps_it_supervised() -> None:
    connection = MemoryConnection()
    connection.fail_opens = [RuntimeError("boom")]
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, FAILED)
        assert supervisor.last_error == "unexpected failure: RuntimeError: boom"
        supervisor.kick()  # as every catalog does: a backend never ready is tried again, after its backoff
        await states.until(supervisor, READY)
        assert supervisor.restarts == 1 and supervisor.status().tools == ("echo", "grow")


async def test_a_spawn_error_is_reported_in_the_connections_words() -> None:
    connection = MemoryConnection()
    connection.fail_opens = [FileNotFoundError(2, "No such file or directory")]
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, FAILED)
        assert supervisor.last_error == "cannot start the memory server: [Errno 2] No such file or directory"
        assert await call_by_name(supervisor, "echo") == "echo ran"  # a call restarts it
        assert supervisor.restarts == 1


async def test_tools_the_backend_says_changed_are_listed_again() -> None:
    async with supervised(spec(), MemoryConnection()) as (supervisor, states):
        await states.until(supervisor, READY)
        version = supervisor.tools.version
        await call(supervisor, "grow")
        await states.wait(lambda: supervisor.tools.version != version)
        assert supervisor.status().tools == ("echo", "grow", "grown2")
        assert [h.tool.name for h in supervisor.handles()] == ["echo", "grow", "grown2"]


async def test_an_idle_backend_stops_and_starts_again_on_a_call_without_counting_a_restart() -> None:
    connection = MemoryConnection()
    async with supervised(spec(idleStopSeconds=0.05), connection) as (supervisor, states):
        await states.until(supervisor, IDLE)
        assert await call(supervisor, "echo") == "echo ran"
        assert supervisor.restarts == 0
    assert states.seen[:5] == [STARTING, READY, IDLE, STARTING, READY]
    assert connection.opens == 2


async def test_a_lazy_backend_learns_its_tools_once_then_starts_only_for_a_call(tmp_path: Path) -> None:
    store = ManifestStore(tmp_path)
    first = MemoryConnection()
    async with supervised(spec(start="lazy"), first, store) as (supervisor, states):
        await states.until(supervisor, IDLE)
    assert states.seen == [STARTING, READY, IDLE, STOPPED] and first.opens == 1

    second = MemoryConnection()
    async with supervised(spec(start="lazy"), second, store) as (supervisor, states):
        assert supervisor.state is IDLE and supervisor.status().tools == ("echo", "grow")
        assert second.opens == 0, "planning uses the manifest: nothing starts before a call"
        assert await call(supervisor, "echo") == "echo ran"
    assert second.opens == 1


async def test_a_refused_streamable_http_start_falls_back_within_the_same_attempt() -> None:
    connection = MemoryConnection()
    connection.fail_opens = [WrongTransport()]
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
    assert states.seen == [STARTING, READY, STOPPED]
    assert connection.opens == 2 and supervisor.restarts == 0


async def test_a_refused_token_is_refreshed_once_per_session_then_the_backend_needs_authorization() -> None:
    connection = MemoryConnection()
    connection.fail_opens = [AuthRequired()]
    async with supervised(oauth_spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)  # refreshed at once, within the same attempt
        assert connection.refreshes == 1

        connection.refuse()  # mid-session: the session starts again with a refreshed token
        await states.wait(lambda: connection.opens == 3 and supervisor.state is READY)
        assert connection.refreshes == 2 and supervisor.restarts == 0

        connection.refreshable = False
        connection.refuse()
        await states.until(supervisor, NEEDS_AUTH)
        assert supervisor.last_error == "the server asks for authorization: run `agentify auth mem`"
        with pytest.raises(BackendUnavailable, match="needs authorization: run `agentify auth mem`"):
            await supervisor.call("echo", {})  # nothing new to try: refused without a start
        assert connection.opens == 3

        connection.stamp = 1.0  # `agentify auth mem` stored new credentials
        supervisor.kick()
        assert supervisor.state is RESTARTING
        await states.until(supervisor, READY)
        assert supervisor.restarts == 1
    assert states.seen == [STARTING, READY, STARTING, READY, NEEDS_AUTH, RESTARTING, READY, STOPPED]


async def test_a_backend_without_oauth_refused_with_401_fails_naming_its_credentials() -> None:
    connection = MemoryConnection()
    connection.fail_opens = [AuthRequired()]
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, FAILED)
    assert supervisor.last_error is not None and "refused the credentials (HTTP 401)" in supervisor.last_error
    assert connection.refreshes == 0


def test_illegal_transitions_raise_and_leave_the_state_as_it_was() -> None:
    lifecycle = Lifecycle(BackendState.STOPPED, lambda: None)
    with pytest.raises(IllegalTransition, match="from stopped to ready"):
        lifecycle.enter(READY)
    assert lifecycle.state is STOPPED
    lifecycle.enter(STARTING)
    with pytest.raises(IllegalTransition, match="from starting to idle"):
        lifecycle.enter(IDLE)
    lifecycle.enter(READY)
    lifecycle.enter(READY)  # staying is no transition


async def test_a_restart_asked_for_ends_the_session_and_starts_a_new_one_at_once() -> None:
    connection = MemoryConnection()
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        assert supervisor.restart() and supervisor.restart()  # asked twice before it began: one restart
        await states.wait(lambda: states.seen[-2:] == [RESTARTING, READY])
    assert states.seen == [STARTING, READY, RESTARTING, READY, STOPPED]
    assert connection.opens == 2 and supervisor.restarts == 1 and supervisor.last_error is None


async def test_a_disabled_backend_does_not_restart() -> None:
    async with supervised(spec(enabled=False), MemoryConnection()) as (supervisor, _):
        assert not supervisor.restart()


def test_the_backoff_doubles_after_quick_failures_and_starts_over_after_a_clean_end() -> None:
    backoff = Backoff()
    delays = []
    for _ in range(3):
        backoff.after(ended_badly=True, lasted=1.0)
        delays.append(backoff.delay)
    assert delays == [BACKOFF_FIRST, 2 * BACKOFF_FIRST, 4 * BACKOFF_FIRST]
    backoff.after(ended_badly=True, lasted=3600.0)  # it had been up for an hour: no penalty
    assert backoff.delay == 0.0
    backoff.after(ended_badly=True, lasted=1.0)
    backoff.after(ended_badly=False, lasted=1.0)
    assert backoff.delay == 0.0 and backoff.left() == 0.0


async def test_a_call_refused_with_401_runs_once_more_on_a_session_with_a_refreshed_token() -> None:
    connection = MemoryConnection()
    async with supervised(oauth_spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        connection.refuse_calls = 1
        assert await call_by_name(supervisor, "echo") == "echo ran"
        assert connection.refreshes == 1 and connection.opens == 2 and supervisor.restarts == 0
    assert states.seen == [STARTING, READY, STARTING, READY, STOPPED]


async def test_a_call_refused_with_401_by_a_backend_without_oauth_is_not_made_again() -> None:
    connection = MemoryConnection()
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        connection.refuse_calls = 1
        with pytest.raises(BackendUnavailable, match=r"refused the credentials \(HTTP 401\)"):
            await call_by_name(supervisor, "echo")
        await states.until(supervisor, FAILED)
    assert connection.opens == 1 and connection.refreshes == 0


async def test_a_question_a_2026_session_cannot_carry_reopens_the_session_on_2025_and_calls_again() -> None:
    connection = MemoryConnection(["echo", "ask"])
    async with supervised(spec(), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        assert await call_by_name(supervisor, "ask") == "ask ran"
        assert connection.opens == 2 and supervisor.restarts == 0
        assert await call_by_name(supervisor, "ask") == "ask ran"  # the era stays fallen back
        assert connection.opens == 2
    assert states.seen == [STARTING, READY, STARTING, READY, STOPPED]


async def test_a_question_on_a_pinned_2026_session_fails_saying_which_protocol_to_set() -> None:
    connection = MemoryConnection(["echo", "ask"])
    async with supervised(spec(protocol="2026-07-28"), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        with pytest.raises(BackendError, match='set "protocol": "2025-11-25"'):
            await call_by_name(supervisor, "ask")
        assert connection.opens == 1 and supervisor.state is READY


async def test_a_listing_again_that_times_out_keeps_the_tools_and_the_next_change_is_listed() -> None:
    connection = MemoryConnection()
    async with supervised(spec(startupTimeoutSeconds=0.5), connection) as (supervisor, states):
        await states.until(supervisor, READY)
        version = supervisor.tools.version
        connection.hang_listing = True
        await call(supervisor, "grow")
        with anyio.fail_after(5):
            await connection.hung.wait()
        connection.hang_listing = False
        await call(supervisor, "grow")
        await states.wait(lambda: supervisor.tools.version != version)
        assert supervisor.status().tools == ("echo", "grow", "grown2", "grown3")
        assert supervisor.state is READY and connection.opens == 1 and supervisor.restarts == 0
