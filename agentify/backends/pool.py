"""A backend's sessions, each leased to one call at a time: what the backend says during a call is that call's.

Nothing on the wire ties a backend's request or notification to the call it belongs to: not over stdio, and the
SDK's HTTP client does not say on which call's stream a message came either. So a call leases a session of its
own. The supervisor's own session comes first; when it is busy, an extra session (for a command, another process)
is leased, started on demand and stopped after `LANE_IDLE_SECONDS` without calls, at most `maxSessions` in all.
A call that finds them all busy waits for one, at most the backend's `timeoutSeconds`.

An extra session is a `Supervisor` of its own (its own owner task, restarts and backoff), started lazily and for
calls only: the backend's tools, resources, subscriptions and list changes are the supervisor's own session's,
as are its state and restarts in `list_backends` and the console (which also show the extra sessions' pids).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from agentify.errors import TaskTimeout

if TYPE_CHECKING:
    from agentify.backends.supervisor import Supervisor

LANE_IDLE_SECONDS = 60.0  # an extra session stops after this long without calls (or idleStopSeconds, if shorter)


@dataclass(eq=False)
class _Lane:
    supervisor: Supervisor | None  # None: the owner's own session
    busy: bool = False


class Lanes:
    """The leases of one backend's sessions; safe to use from any task of the backend's owner."""

    def __init__(self, backend: str, bound: int, wait_limit: float, extra: Callable[[], Supervisor] | None) -> None:
        """`extra` makes the supervisor of one more session (None: the backend has one session only)."""
        self._backend = backend
        self._bound = bound if extra is not None else 1
        self._wait_limit = wait_limit
        self._extra = extra
        self._lanes = [_Lane(None)]
        self._waiting: deque[tuple[anyio.Event, list[_Lane]]] = deque()
        """Calls waiting for a session, first come first served: a freed one is handed to the first."""
        self._tg: TaskGroup | None = None

    @property
    def extras(self) -> list[Supervisor]:
        return [lane.supervisor for lane in self._lanes if lane.supervisor is not None]

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Runs the extra sessions' owner tasks for as long as the block runs; they stop as it ends."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                for supervisor in self.extras:
                    supervisor.stop()

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[Supervisor | None]:
        """A session no other call uses until the block ends: None for the owner's own, else an extra one's
        supervisor. A backend that has one session only (`extra` None) shares it among its calls instead.

        Raises:
            TaskTimeout: every session stayed busy for the backend's `timeoutSeconds`.
        """
        if self._extra is None:  # one session only (remote OAuth): its calls share it, as they always did
            yield None
            return
        lane = self._free()
        if lane is None:
            lane = await self._handed()
        try:
            yield lane.supervisor
        finally:
            self._release(lane)

    async def _handed(self) -> _Lane:
        """The session a finishing call hands over, waited for at most the backend's timeout."""
        entry: tuple[anyio.Event, list[_Lane]] = (anyio.Event(), [])
        self._waiting.append(entry)
        handed = entry[1]
        try:
            with anyio.move_on_after(self._wait_limit):
                await entry[0].wait()
        except BaseException:  # cancelled: a session handed over meanwhile goes to the next
            if handed:
                self._release(handed[0])
            else:
                self._waiting.remove(entry)
            raise
        if handed:
            return handed[0]
        self._waiting.remove(entry)
        sessions = f"all {self._bound} sessions" if self._bound > 1 else "the one session"
        raise TaskTimeout(
            f"{sessions} of backend {self._backend!r} stayed busy with other calls for {self._wait_limit:g} s, "
            "so the call was not made. Raise maxSessions for the backend in the config if it should carry more "
            "calls at once."
        )

    def _release(self, lane: _Lane) -> None:
        """The lane goes to the first call waiting (it stays busy), else it is free."""
        if self._waiting:
            event, handed = self._waiting.popleft()
            handed.append(lane)
            event.set()
        else:
            lane.busy = False

    def _free(self) -> _Lane | None:
        """A free lane (the owner's first), or a new one while fewer than the bound run."""
        lane = next((lane for lane in self._lanes if not lane.busy), None)
        if lane is None and len(self._lanes) < self._bound and self._tg is not None and self._extra is not None:
            lane = _Lane(self._extra())
            self._lanes.append(lane)
            assert lane.supervisor is not None
            self._tg.start_soon(lane.supervisor.run)
        if lane is not None:
            lane.busy = True
        return lane
