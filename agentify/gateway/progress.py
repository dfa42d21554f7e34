"""Relaying a backend's progress to a client that takes it slower than the backend sends it.

The MCP client runs each incoming progress notification in a task of its own: 200,000 of them
from a chatty backend, each waiting to be written to the IDE, took the gateway from 86 to 704 MiB
(428 MiB stayed). Here only one report is written at a time, and the reports that come meanwhile
replace each other: a flood costs one pending report, and the IDE sees the latest state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


class LatestProgress:
    """Forwards reports to `send` one at a time; while one is being sent, only the newest waits."""

    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send = send
        self._pending: str | None = None
        self._idle = anyio.Event()
        self._idle.set()

    async def __call__(self, report: str) -> None:
        self._pending = report
        if not self._idle.is_set():
            return  # the report being sent now is followed by this one, or by a newer one
        self._idle = anyio.Event()
        try:
            while self._pending is not None:
                report, self._pending = self._pending, None
                await self._send(report)
        finally:
            self._idle.set()

    async def settled(self) -> None:
        """Returns once every report has been sent (or has been replaced by a newer one that was)."""
        await self._idle.wait()
