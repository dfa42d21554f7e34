"""What replicas of one team gateway share so that any of them can serve a 2026-07-28 round trip
(DESIGN.md, "Across replicas"): the keys that seal `requestState`, and the ledger of used answers.

`AGENTIFY_STATE_KEYS` holds comma-separated keys of at least 32 bytes each: the first seals, every
one opens, so a key is rotated by adding the new one first, then dropping the old one after one
`confirmTimeoutSeconds`. Without it each replica makes its own key, which is right for one replica
only; `server.redis` then gets a warning. With `server.redis` the used answers are kept in Redis
(`RedisLedger`), so an answer counts once whichever replica it reaches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loguru import logger

from agentify._common.errors import ConfigError
from agentify.config import Config
from agentify.team.answer_ledger import AnswerLedger, MemoryLedger, RedisLedger

STATE_KEYS_ENV = "AGENTIFY_STATE_KEYS"
MIN_KEY_BYTES = 32
MIN_KEY_SYMBOLS = 10
"""Fewer different characters than this is no random key (a hex key has 16; "0" * 64 has one)."""


def state_keys(environ: Mapping[str, str], variable: str = STATE_KEYS_ENV) -> list[str] | None:
    """The keys of `variable` (`AGENTIFY_STATE_KEYS`, or the vault's), sealing key first; None when it is unset
    or blank.

    Raises:
        ConfigError: a key is shorter than 32 bytes or made of fewer than `MIN_KEY_SYMBOLS` different
            characters, or listed twice (the message never shows a key)."""
    keys = [key.strip() for key in environ.get(variable, "").split(",") if key.strip()]
    for n, key in enumerate(keys, start=1):
        if len(key.encode()) < MIN_KEY_BYTES or len(set(key)) < MIN_KEY_SYMBOLS:
            raise ConfigError(
                f"{variable}: key {n} of {len(keys)} is {len(key.encode())} bytes of {len(set(key))} different "
                f"characters; each key must be at least {MIN_KEY_BYTES} bytes of secret randomness (a placeholder or "
                "a repeated character is not). Make one with: "
                'python3 -c "import secrets; print(secrets.token_hex(32))"'
            )
    if len(set(keys)) < len(keys):
        raise ConfigError(f"{variable} names one key twice: list each key once, the sealing key first")
    return keys or None


@dataclass(frozen=True)
class SharedState:
    """What a replica's round trips are sealed with (`keys`; empty: a key of its own) and where the used
    answers are counted."""

    ledger: AnswerLedger
    keys: tuple[str, ...]


def shared_state(config: Config, environ: Mapping[str, str]) -> SharedState:
    """The state of an HTTP replica: the shared keys, and answers counted in Redis when `server.redis` is
    set. Raises ConfigError (see `state_keys`)."""
    keys = state_keys(environ)
    redis = config.server.redis
    if redis and keys is None:
        logger.warning(
            "server.redis is set but {} is not: each replica seals 2026-07-28 round trips with its own key, so a "
            "confirmation asked by one replica fails at another. Give every replica the same {}.",
            STATE_KEYS_ENV,
            STATE_KEYS_ENV,
        )
    ledger: AnswerLedger = RedisLedger(redis) if redis else MemoryLedger()
    return SharedState(ledger, tuple(keys or ()))
