"""Tasks that run in the background of a body of code, without changing what the body raises.

A bare anyio task group wraps whatever its body raises in an `ExceptionGroup`, so the `except` clauses
around it, written for the exception itself (an `InvalidInput`, a 2026-07-28 round-trip signal), no
longer match, and the error turns into a protocol error. `background` is the task group to use
wherever a body (a `yield` in a context manager above all) runs beside tasks of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def background() -> AsyncIterator[TaskGroup]:
    """A task group whose tasks are cancelled when the body ends, however it ends.

    The body's own exception leaves as it was raised, never wrapped. A task's failure leaves as the task
    group raises it, with the body's exception (if any) beside it in the group, so neither is lost."""
    raised: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            try:
                yield tg
            except Exception as exc:  # cancellation is a BaseException: anyio keeps it unwrapped itself
                raised = exc
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if raised is None:
            raise
        raise BaseExceptionGroup(group.message, [*group.exceptions, raised]) from None
    if raised is not None:
        raise raised
