"""Pinned tool definitions (config `pinning`, DESIGN.md "Who may do what"): a backend's tools are
recorded at first sight, and a change, an addition or a description that speaks to the model waits
for a person's approval (`agentify pins approve`)."""

from __future__ import annotations

from agentify.config import Config
from agentify.pinning.book import Held, Mode, PinBook, refusal
from agentify.pinning.records import PinStoreError
from agentify.pinning.store import FileStore, PinStore, state_dir

__all__ = ["FileStore", "Held", "Mode", "PinBook", "PinStore", "PinStoreError", "open_store", "refusal"]


def open_store(config: Config) -> PinStore:
    """Redis with `server.redis` (shared by every replica), else `pins.json` in the state folder."""
    if config.server.redis:
        from agentify.pinning.redis_store import RedisStore

        return RedisStore(config.server.redis)
    return FileStore(state_dir())
