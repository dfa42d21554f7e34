"""The progress relay (gateway/progress.py): a client slower than its backend gets the latest report, not a queue."""

from __future__ import annotations

import anyio
import pytest

from agentify.gateway.progress import LatestProgress

pytestmark = pytest.mark.anyio


async def test_reports_that_come_while_one_is_written_are_replaced_by_the_newest() -> None:
    written: list[str] = []
    release = anyio.Event()

    async def slow_send(report: str) -> None:
        written.append(report)
        if len(written) == 1:
            await release.wait()  # the client takes the first report slowly

    relay = LatestProgress(slow_send)
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay, "1")
        await anyio.wait_all_tasks_blocked()
        for n in range(2, 1001):
            await relay(str(n))  # returns at once: only the newest waits
        assert written == ["1"]
        release.set()
        with anyio.fail_after(5):
            await relay.settled()
    assert written == ["1", "1000"]


async def test_a_report_to_a_client_that_keeps_up_is_written_at_once() -> None:
    written: list[str] = []

    async def send(report: str) -> None:
        written.append(report)

    relay = LatestProgress(send)
    for n in range(3):
        await relay(str(n))
    await relay.settled()
    assert written == ["0", "1", "2"]
