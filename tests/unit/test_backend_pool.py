"""The leases of a backend's sessions (`backends/pool.py`), in process: the owner's session first, extra sessions
(real supervisors over a memory connection) while calls overlap, never more than `maxSessions`, and a call that
finds them all busy waits for one, at most the backend's timeout."""

from __future__ import annotations

import anyio
import pytest

from agentify.backends.manifest import ManifestStore
from agentify.backends.pool import Lanes
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor
from agentify.config import BackendConfig
from agentify.errors import TaskTimeout
from tests.fakes.memory_connection import MemoryConnection

pytestmark = pytest.mark.anyio


def extra_session() -> Supervisor:
    spec = BackendConfig.model_validate({"id": "mem", "command": "memory", "start": "lazy"})
    return Supervisor(spec, MemoryConnection(), StderrLog("mem"), ManifestStore(None))


async def test_overlapping_leases_get_the_owners_session_then_extra_ones_up_to_the_bound() -> None:
    lanes = Lanes("mem", 3, 0.5, extra_session)
    with anyio.fail_after(10):
        async with lanes.serving():
            async with lanes.lease() as first, lanes.lease() as second, lanes.lease() as third:
                assert first is None and second is not None and third is not None and second is not third
                with pytest.raises(TaskTimeout, match="all 3 sessions of backend 'mem' stayed busy.*maxSessions"):
                    async with lanes.lease():
                        pass
            async with lanes.lease() as again, lanes.lease() as extra:
                assert again is None and extra is second  # freed sessions are leased again, none is added
            assert len(lanes.extras) == 2


async def test_a_call_that_finds_every_session_busy_gets_the_first_one_freed() -> None:
    lanes = Lanes("mem", 1, 10, extra_session)
    got: list[str] = []

    async def second() -> None:
        async with lanes.lease():
            got.append("second")

    with anyio.fail_after(10):
        async with lanes.serving(), anyio.create_task_group() as tg:
            async with lanes.lease():
                tg.start_soon(second)
                await anyio.sleep(0.2)
                assert got == []  # it waits while the only session is leased
                got.append("first done")
    assert got == ["first done", "second"]


async def test_without_a_way_to_open_more_the_calls_share_the_one_session() -> None:
    lanes = Lanes("mem", 4, 0.2, None)  # a remote OAuth backend: one session, whose calls overlap as before
    with anyio.fail_after(10):
        async with lanes.serving(), lanes.lease() as own, lanes.lease() as shared:
            assert own is None and shared is None and lanes.extras == []


async def test_waiting_calls_get_freed_sessions_in_order_and_a_cancelled_one_keeps_none() -> None:
    lanes = Lanes("mem", 1, 10, extra_session)
    order: list[str] = []

    async def waiter(name: str) -> None:
        async with lanes.lease():
            order.append(name)

    with anyio.fail_after(10):
        async with lanes.serving():
            async with anyio.create_task_group() as tg:
                async with lanes.lease():
                    tg.start_soon(waiter, "first")
                    await anyio.sleep(0.05)
                    tg.start_soon(waiter, "second")
                    await anyio.sleep(0.05)
                    async with anyio.create_task_group() as cancelled:
                        cancelled.start_soon(waiter, "cancelled while waiting")
                        await anyio.sleep(0.05)
                        cancelled.cancel_scope.cancel()
                    tg.start_soon(waiter, "third")
                    await anyio.sleep(0.05)
            async with anyio.create_task_group() as late:
                async with lanes.lease():
                    late.start_soon(waiter, "cancelled once handed the session")
                    await anyio.sleep(0.05)
                late.cancel_scope.cancel()  # handed over as the lease ended: it runs, or is cancelled, and frees it
            async with lanes.lease() as again:  # nothing was left leased by the cancelled ones
                assert again is None
    assert order[:3] == ["first", "second", "third"]
