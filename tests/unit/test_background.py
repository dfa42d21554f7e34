"""`background`: tasks beside a body, and the body's exception left as it was raised."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from agentify._common.background import background

pytestmark = pytest.mark.anyio


class Signal(Exception):
    """What a handler after the body matches by type (a refusal, a round-trip signal)."""


async def test_the_bodys_exception_leaves_unwrapped_and_the_tasks_are_cancelled() -> None:
    cancelled = anyio.Event()

    async def beside() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with pytest.raises(Signal):  # not an ExceptionGroup
        async with background() as tg:
            tg.start_soon(beside)
            await anyio.lowlevel.checkpoint()
            raise Signal("for the handler")
    assert cancelled.is_set()


async def test_a_failing_task_is_raised_with_the_bodys_exception_beside_it() -> None:
    async def fails() -> None:
        raise ValueError("a bug in the task")

    with pytest.raises(BaseExceptionGroup) as raised:
        async with background() as tg:
            tg.start_soon(fails)
            try:
                await anyio.sleep_forever()
            finally:
                raise Signal("the body's own")
    assert {type(e) for e in raised.value.exceptions} == {ValueError, Signal}


async def test_an_outer_cancellation_ends_body_and_tasks() -> None:
    with anyio.move_on_after(0.05) as scope:
        async with background() as tg:
            tg.start_soon(anyio.sleep_forever)
            await anyio.sleep_forever()
    assert scope.cancelled_caught
