"""What a backend is doing: the state machine and the snapshot `list_backends`, `doctor` and the console show."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio


class BackendState(enum.StrEnum):
    IDLE = "idle"  # lazy, or stopped after idleStopSeconds: not running, its tools known from the manifest
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    RESTARTING = "restarting"
    NEEDS_AUTH = "needs_auth"  # a remote server wants authorization: `agentify auth <id>`
    STOPPED = "stopped"


_RUNNING = {BackendState.READY, BackendState.FAILED, BackendState.NEEDS_AUTH, BackendState.STOPPED}
TRANSITIONS: dict[BackendState, set[BackendState]] = {
    BackendState.STOPPED: {BackendState.STARTING, BackendState.RESTARTING, BackendState.IDLE},
    BackendState.IDLE: {BackendState.STARTING, BackendState.RESTARTING, BackendState.STOPPED},
    BackendState.STARTING: _RUNNING,
    BackendState.RESTARTING: _RUNNING,
    # READY -> STARTING: the server refused a token mid-session, and the session starts again with a fresh one.
    # READY -> RESTARTING: a person asked for a restart (the console's button).
    BackendState.READY: {
        BackendState.FAILED,
        BackendState.NEEDS_AUTH,
        BackendState.IDLE,
        BackendState.STOPPED,
        BackendState.STARTING,
        BackendState.RESTARTING,
    },
    BackendState.FAILED: {BackendState.RESTARTING, BackendState.STOPPED},
    BackendState.NEEDS_AUTH: {BackendState.RESTARTING, BackendState.STOPPED},
}
SETTLED = (BackendState.READY, BackendState.FAILED, BackendState.NEEDS_AUTH, BackendState.IDLE)
STARTING = (BackendState.STARTING, BackendState.RESTARTING)
ENDED_BADLY = (BackendState.FAILED, BackendState.NEEDS_AUTH)
"""The states after which the next start is a restart (counted, with backoff)."""


class IllegalTransition(RuntimeError):
    """A state change that `TRANSITIONS` does not allow: a bug in the supervisor, never a backend's doing."""


class Lifecycle:
    """One backend's state. It changes only through `enter`, which refuses what `TRANSITIONS` does not
    allow; tasks wait for a change with `wait_while`, and `on_change` hears of every one."""

    def __init__(self, state: BackendState, on_change: Callable[[], None]) -> None:
        self._state = state
        self._on_change = on_change
        self._changed = anyio.Event()

    @property
    def state(self) -> BackendState:
        return self._state

    def enter(self, state: BackendState) -> None:
        """Raises IllegalTransition; entering the current state changes nothing."""
        if state is self._state:
            return
        if state not in TRANSITIONS[self._state]:
            raise IllegalTransition(f"a backend cannot go from {self._state.value} to {state.value}")
        self._state = state
        self.changed()

    def changed(self) -> None:
        """Something shown about the backend changed (its state, its tools): wake the waiters, tell the listener."""
        self.wake()
        self._on_change()

    def wake(self) -> None:
        """Makes every waiter look again (the backend is stopping)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_while(self, busy: Callable[[], bool], seconds: float) -> None:
        """Waits, at most `seconds`, until `busy()` is false; re-checked on every change and wake."""
        with anyio.move_on_after(seconds):
            while busy():
                await self._changed.wait()


@dataclass(frozen=True, kw_only=True)
class BackendStatus:
    """A snapshot of one backend. `url` is already masked (no userinfo, no query tokens)."""

    id: str
    description: str
    state: BackendState
    pid: int | None
    tools: tuple[str, ...]
    restarts: int
    last_error: str | None
    stderr_tail: tuple[str, ...]
    enabled: bool = True
    url: str | None = None
    start: str = "eager"
    server: str | None = None
    """What the backend says it is (its MCP server info: name, version, description), once it has started."""
    withheld: tuple[tuple[str, str], ...] = ()
    """(tool, why) of each tool `pinning: enforce` keeps from every list until a person approves it."""
    flagged: tuple[tuple[str, str], ...] = ()
    """(tool, why) of each tool `pinning: warn` lists although it waits for approval."""
    extra_pids: tuple[int, ...] = ()
    """The processes of the backend's extra sessions running now (calls that overlapped, `pool.py`)."""

    def pins_dict(self) -> dict[str, list[dict[str, str]]]:
        """The withheld and flagged tools, as `list_backends` and the console show them."""
        return {
            "withheld": [{"tool": tool, "reason": why} for tool, why in self.withheld],
            "flagged": [{"tool": tool, "reason": why} for tool, why in self.flagged],
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "state": self.state.value,
            "pid": self.pid,
            "extraPids": list(self.extra_pids),
            "url": self.url,
            "start": self.start,
            "tools": list(self.tools),
            "restarts": self.restarts,
            "lastError": self.last_error,
            "stderrTail": list(self.stderr_tail),
            "enabled": self.enabled,
            "server": self.server,
        } | self.pins_dict()
