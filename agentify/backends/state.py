"""What a backend is doing: the state machine and the snapshot `list_backends`, `doctor` and the console show."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


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
    BackendState.READY: {BackendState.FAILED, BackendState.NEEDS_AUTH, BackendState.IDLE, BackendState.STOPPED},
    BackendState.FAILED: {BackendState.RESTARTING, BackendState.STOPPED},
    BackendState.NEEDS_AUTH: {BackendState.RESTARTING, BackendState.STOPPED},
}
SETTLED = (BackendState.READY, BackendState.FAILED, BackendState.NEEDS_AUTH, BackendState.IDLE)
STARTING = (BackendState.STARTING, BackendState.RESTARTING)


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "state": self.state.value,
            "pid": self.pid,
            "url": self.url,
            "start": self.start,
            "tools": list(self.tools),
            "restarts": self.restarts,
            "lastError": self.last_error,
            "stderrTail": list(self.stderr_tail),
            "enabled": self.enabled,
        }
