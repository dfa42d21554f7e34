"""Leaving a server process whose stdin reader cannot be interrupted.

The SDK reads stdin in a worker thread that only returns at EOF, so neither the gateway nor the
arbigent runner can leave by returning after a signal: both end with `leave_now`, the gateway
from a timer (`ExitWatchdog`), the runner once its runs are stopped.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NoReturn

from loguru import logger

# After SIGTERM or SIGINT, leave at once once every backend is closed; after stdin EOF the
# process normally ends by itself, and this only catches a stuck exit.
EXIT_WATCHDOG_SECONDS = 2.0


class ExitWatchdog:
    """Ends `serve` once every backend is closed. The SDK reads stdin in a worker thread that only
    returns at EOF, so after a signal the process would otherwise wait for input forever."""

    def __init__(self, shutdown_seconds: float) -> None:
        self.signalled = threading.Event()
        self._shutdown_seconds = shutdown_seconds
        self._serving = False

    def serving(self) -> None:
        """The client spoke and the gateway opens its services: from now on a signal waits for their close."""
        self._serving = True

    def signal(self) -> None:
        """A signal arrived: before the client spoke nothing was started, so leave at once; else as soon as
        the backends are closed, and in any case once their close (bounded by `shutdown_seconds`) must be
        over. Called on the event loop, as `serving` is: a client's first message cannot slip between."""
        self.signalled.set()
        if not self._serving:
            logger.info("agentify stopped before its client spoke")
            leave_now(0)
        _exit_after(self._shutdown_seconds + EXIT_WATCHDOG_SECONDS)

    def closed(self) -> None:
        _exit_after(0.0 if self.signalled.is_set() else EXIT_WATCHDOG_SECONDS)


def leave_now(status: int) -> NoReturn:
    """Ends the process at once with `status`, after flushing stderr (the log), without joining threads."""
    sys.stderr.flush()
    os._exit(status)


def _exit_after(seconds: float) -> None:
    def hard_exit() -> None:
        logger.info("agentify stopped")
        leave_now(0)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()
