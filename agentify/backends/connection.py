"""The connection interface: how a supervisor reaches one backend, whatever the transport.

A `Connection` opens `Link`s: the JSON-RPC stream pair the SDK's `ClientSession` runs on, an
event set the moment the link is gone (process exited, stream ended), and how to describe
that end to a person. `open` is an async context manager entered and left by the backend's
owner task only; leaving it closes the transport (bounded, shielded where it stops a process).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from agentify.backends.failures import AuthRequired, SessionFailure, WrongTransport

__all__ = ["AuthRequired", "Connection", "Link", "WrongTransport"]


@dataclass(kw_only=True)
class Link:
    """One open connection to a backend."""

    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    gone: anyio.Event = field(default_factory=anyio.Event)
    pid: int | None = None
    # Local processes: the exit code once exited (waits, bounded), None while still running.
    exit_code: Callable[[], Awaitable[int | None]] | None = None
    # Remote links: why the connection ended, in words, once known.
    lost_reason: str | None = None
    # Remote links: the last HTTP status that refused a request (401, 404, ...), else None.
    refused_status: int | None = None


class Connection(Protocol):
    """A way to reach one backend; `open` may be called again after a link ended."""

    kind: str  # "stdio", "streamable-http" or "sse"

    def open(self) -> AbstractAsyncContextManager[Link]: ...

    def fall_back(self) -> bool:
        """Switches to the older transport after a refusal that calls for it; False if there is none."""
        ...

    def retry_auth(self) -> bool:
        """After the server asked for a new authorization: arrange a refresh for the next session, if possible."""
        ...

    def auth_stamp(self) -> float:
        """Changes when stored credentials change (after `agentify auth`); constant if there are none."""
        ...

    def failure(self, exc: BaseException) -> SessionFailure:
        """What an error raised while opening or serving this connection means: `Unreachable` for the
        transport's expected errors (refused, not found, timed out), `Unexpected` for the rest."""
        ...
