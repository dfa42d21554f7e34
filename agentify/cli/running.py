"""Running a command's async main under signals: SIGTERM and SIGINT cancel it, so every backend is
shut down before the process exits."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
from loguru import logger

from agentify._common.signals import stop_signals
from agentify.cli.errors import EXIT_INTERRUPTED, EXIT_OK


def one_shot(command: str, main: Callable[[], Awaitable[int]]) -> int:
    code = run_async(main)
    if code == EXIT_INTERRUPTED:
        print(f"agentify {command}: interrupted", file=sys.stderr)
    return code


def run_async(main: Callable[[], Awaitable[int]], on_signal: Callable[[], None] | None = None) -> int:
    """Runs `main`; SIGTERM and SIGINT cancel it, so every backend is shut down before the exit.

    Errors propagate (wrapped in exception groups by the task group): `main()` reports them."""
    result = EXIT_OK

    async def watch_signals(scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with stop_signals() as signals:
            task_status.started()  # before main() spawns anything: no backend can miss the shutdown
            async for signum in signals:
                name = signum.name
                if scope.cancel_called:  # a second Ctrl-C while backends close: the close is bounded
                    logger.info("signal {} received: already shutting down", name)
                    continue
                logger.info("signal {} received: shutting down", name)
                if on_signal is not None:
                    on_signal()
                scope.cancel()

    async def runner() -> None:
        nonlocal result
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                await tg.start(watch_signals, scope)
                result = await main()
            if scope.cancelled_caught:
                result = EXIT_INTERRUPTED
            tg.cancel_scope.cancel()

    anyio.run(runner)
    return result
