"""The hand-over between tasks that want a backend session and its owner task (`starts.py`): an attempt begins
only once asked and never once stopping, and a caller's wait ends with the outcome of the attempt it asked for.
"""

from __future__ import annotations

import time

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from agentify.backends.starts import Starts
from agentify.backends.state import BackendState, Lifecycle

pytestmark = pytest.mark.anyio

STARTING, READY, FAILED = BackendState.STARTING, BackendState.READY, BackendState.FAILED
RESTARTING, STOPPED = BackendState.RESTARTING, BackendState.STOPPED


def starts_in(state: BackendState) -> tuple[Starts, Lifecycle]:
    lifecycle = Lifecycle(state, lambda: None)
    return Starts(lifecycle), lifecycle


async def test_the_owner_starts_once_asked_and_not_again_until_asked_again() -> None:
    starts, _ = starts_in(STOPPED)
    starts.ask()
    starts.ask()  # asked twice before it began: one attempt answers both
    began: list[bool] = []

    async def owner() -> None:
        began.append(await starts.next())

    with anyio.fail_after(5):
        assert await starts.next()
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            await wait_all_tasks_blocked()
            assert began == [], "an attempt began that nobody asked for"
            starts.ask()
        assert began == [True]


async def test_a_stopping_backend_never_starts_and_its_owner_returns() -> None:
    starts, _ = starts_in(STOPPED)
    starts.ask()
    starts.stop()
    with anyio.fail_after(5):
        assert not await starts.next()

    starts, _ = starts_in(STOPPED)
    starts.backoff.next_start_at = time.monotonic() + 3600  # an hour's backoff, cut short by the stop
    starts.ask()
    began: list[bool] = []

    async def owner() -> None:
        began.append(await starts.next())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            await wait_all_tasks_blocked()
            starts.stop()
    assert began == [False]


async def test_a_caller_waits_for_the_attempt_it_asked_for_not_the_failure_before_it() -> None:
    starts, lifecycle = starts_in(FAILED)
    done = anyio.Event()

    async def caller() -> None:
        await starts.tried(30)
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller)
            assert await starts.next()
            lifecycle.enter(RESTARTING)
            await wait_all_tasks_blocked()
            assert not done.is_set(), "the failure it saw when it asked is not the outcome of its attempt"
            lifecycle.enter(FAILED)
            await done.wait()


async def test_a_caller_waiting_for_a_start_is_released_by_ready_or_by_a_stop() -> None:
    starts, lifecycle = starts_in(STOPPED)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(starts.tried, 30)
            assert await starts.next()
            lifecycle.enter(STARTING)
            lifecycle.enter(READY)

        async with anyio.create_task_group() as tg:
            tg.start_soon(starts.tried, 30)
            await wait_all_tasks_blocked()
            starts.stop()
