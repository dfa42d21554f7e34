"""What a backend is doing: the state machine and the snapshot `list_backends`, `doctor` and the console show."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class BackendState(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    RESTARTING = "restarting"
    STOPPED = "stopped"


TRANSITIONS: dict[BackendState, set[BackendState]] = {
    BackendState.STOPPED: {BackendState.STARTING, BackendState.RESTARTING},
    BackendState.STARTING: {BackendState.READY, BackendState.FAILED, BackendState.STOPPED},
    BackendState.RESTARTING: {BackendState.READY, BackendState.FAILED, BackendState.STOPPED},
    BackendState.READY: {BackendState.FAILED, BackendState.STOPPED},
    BackendState.FAILED: {BackendState.RESTARTING, BackendState.STOPPED},
}
SETTLED = (BackendState.READY, BackendState.FAILED)
STARTING = (BackendState.STARTING, BackendState.RESTARTING)


@dataclass(frozen=True, kw_only=True)
class BackendStatus:
    """A snapshot of one backend."""

    id: str
    description: str
    state: BackendState
    pid: int | None
    tools: tuple[str, ...]
    restarts: int
    last_error: str | None
    stderr_tail: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "state": self.state.value,
            "pid": self.pid,
            "tools": list(self.tools),
            "restarts": self.restarts,
            "lastError": self.last_error,
            "stderrTail": list(self.stderr_tail),
        }
