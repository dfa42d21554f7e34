"""The stop signals (SIGTERM, SIGINT) as they arrive: the one place a signal receiver is opened.

POSIX: anyio's signal receiver. Windows delivers no signal asynchronously (anyio has no receiver
there): the stream then never yields, and Ctrl-C arrives as `KeyboardInterrupt`, which every
command's top-level handler already reports as an interruption.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import anyio

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_signals() -> Iterator[AsyncIterator[signal.Signals]]:
    """Yields the stop signals received while inside, in order."""
    if sys.platform == "win32":
        yield _never()
        return
    with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
        yield received


def exit_status(signum: int) -> int:
    """The exit status of a process ended by `signum`, as shells report it (SIGTERM: 143)."""
    return 128 + signum


async def _never() -> AsyncIterator[signal.Signals]:
    await anyio.sleep_forever()
    yield signal.SIGINT  # pragma: no cover - never reached; makes this an async generator
