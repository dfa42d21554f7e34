"""The idle clock of one backend: calls in flight, the time of the last one, and when the idle time is up."""

from __future__ import annotations

import time
from collections.abc import Iterable

import anyio


class IdleClock:
    """Fed by calls (`begin`/`end`) and by callers about to call (`touch`); read by the owner task.

    `learning`: the backend was started only to learn its tools (a lazy backend with no manifest), so
    its idle time is zero until somebody calls it; from then on it is `idle_stop_seconds`.
    """

    def __init__(self, idle_stop_seconds: float | None = None, *, learning: bool = False) -> None:
        self._idle_stop_seconds = idle_stop_seconds
        self.learning = learning
        self._busy = 0
        self._last_used = time.monotonic()
        self._activity = anyio.Event()
        self._rethink = anyio.Event()

    @property
    def limit(self) -> float | None:
        """Seconds without calls after which the session stops (None: never)."""
        return 0.0 if self.learning else self._idle_stop_seconds

    def touch(self) -> None:
        """Someone is about to call: the idle time starts again, and the backend stays up until idle."""
        self.learning = False
        self._last_used = time.monotonic()
        self._activity.set()

    def begin(self) -> None:
        self._busy += 1
        self._activity.set()

    def end(self) -> None:
        self._busy -= 1
        self.touch()

    def wake(self) -> None:
        """Re-reads the limit now (the backend is stopping)."""
        self._activity.set()
        self._rethink.set()

    async def expired(self) -> None:
        """Returns once no call has run for `limit` seconds; never while `limit` is None."""
        while True:
            seconds = self.limit
            self._activity = anyio.Event()
            if seconds is None:
                # Calls never give a limit to a backend that has none (only a learning start's 0 changes), so
                # only `wake` is waited for here: a call does not wake this task twice for nothing.
                self._rethink = anyio.Event()
                await self._rethink.wait()
                continue
            if self.expired_now():
                return
            left = seconds - (time.monotonic() - self._last_used)
            with anyio.move_on_after(max(left, 0.0) if self._busy == 0 else float("inf")):
                await self._activity.wait()

    def expired_now(self) -> bool:
        """Whether the idle time is up at this instant. The owner asks again right before it stops the session,
        with no await in between: a caller that took the session after `expired` returned has touched the clock
        by then (a learning start's limit is 0, so `expired` returns at once, and a first call races it)."""
        seconds = self.limit
        return seconds is not None and self._busy == 0 and time.monotonic() - self._last_used >= seconds

    async def expired_or(self, events: Iterable[anyio.Event]) -> bool:
        """Waits for the idle time to run out or for one of `events`; True for the first."""
        idle = False
        async with anyio.create_task_group() as tg:

            async def until(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            async def until_idle() -> None:
                nonlocal idle
                await self.expired()
                idle = True
                tg.cancel_scope.cancel()

            for event in events:
                tg.start_soon(until, event)
            tg.start_soon(until_idle)
        return idle
