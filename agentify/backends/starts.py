"""When a backend's owner task starts its next attempt, and how those who asked for it wait: the one hand-over
between the tasks that want a session (a call, `kick`, an eager start) and the task that opens it.

An attempt begins once asked, after the backoff of the last attempt that ended badly, and never once the
backend is stopping. Every wait is bounded and ends early when the backend stops.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from agentify.backends.backoff import Backoff
from agentify.backends.state import ENDED_BADLY, STARTING, BackendState, Lifecycle


class Starts:
    """One backend's: the owner task waits in `next`, callers `ask` (and wait in `tried`), the manager `stop`s."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle
        self.backoff = Backoff()
        self.stopping = anyio.Event()
        self._asked = anyio.Event()

    def ask(self) -> None:
        """Asks for an attempt, without waiting; one already asked for or under way answers it."""
        self._asked.set()

    def stop(self) -> None:
        """The owner task ends its session and returns; every waiter looks again."""
        self.stopping.set()
        self._asked.set()
        self._lifecycle.wake()

    async def next(self) -> bool:
        """The owner's wait for its next attempt: True once asked and the backoff is over, False once stopping."""
        if self.stopping.is_set():
            return False
        await self._asked.wait()
        if self.stopping.is_set():
            return False
        self._asked = anyio.Event()
        with anyio.move_on_after(self.backoff.left()):
            await self.stopping.wait()
        return not self.stopping.is_set()

    async def tried(self, seconds: float) -> None:
        """Asks for an attempt and waits, for the backoff left and then at most `seconds`, until the backend is
        ready or an attempt seen here has ended badly."""
        self.ask()
        attempted = False

        def starting() -> bool:
            nonlocal attempted
            state = self._lifecycle.state
            attempted = attempted or state in STARTING
            return state is not BackendState.READY and not (attempted and state in ENDED_BADLY)

        await self.wait_while(starting, self.backoff.left() + seconds)

    async def wait_while(self, busy: Callable[[], bool], seconds: float) -> None:
        """Waits, at most `seconds`, until `busy()` is false or the backend stops; re-checked on every change."""
        await self._lifecycle.wait_while(lambda: busy() and not self.stopping.is_set(), seconds)
