"""Hot reload of the config file while `serve` runs: the file's stat is polled (no file-watching
dependency, and it works on every file system), and a change is handed to `LiveConfig.reload`.

Reading happens in the event loop: a config file is small, and reading it is what `LiveConfig`
validates before anything is stopped or started.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from loguru import logger

from agentify.gateway.settings import LiveConfig

POLL_SECONDS = 1.0


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


async def watch_config(settings: LiveConfig, path: Path, interval: float = POLL_SECONDS) -> None:
    """Runs until cancelled; each valid change is applied and the `reloaded` listeners are awaited."""
    seen = _signature(path)
    while True:
        await anyio.sleep(interval)
        current = _signature(path)
        if current == seen:
            continue
        seen = current
        if current is None:
            logger.warning("config file {} is gone; the running config stays", path)
            continue
        try:
            if settings.reload():
                for listener in settings.reloaded:
                    await listener()
        except Exception as exc:  # the watcher's top level: a failed reload must not end the gateway
            logger.opt(exception=exc).error("handling the change of config file {} failed", path)
