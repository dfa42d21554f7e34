"""The ledger of used answers: each id once (in one process, or across replicas in Redis), memory given back
as states expire; and the keys replicas share to seal their round trips."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from mcp.server.request_state import InvalidRequestState
from redis.asyncio import Redis

from agentify._common.errors import ConfigError
from agentify.errors import Denied
from agentify.mcp_server.client_requests import Questions
from agentify.team.answer_ledger import MemoryLedger, RedisLedger
from agentify.team.shared_state import STATE_KEYS_ENV, state_keys

pytestmark = pytest.mark.anyio


async def test_an_id_is_used_once_until_its_state_expires() -> None:
    ledger = MemoryLedger()
    until = time.time() + 600
    assert await ledger.use("q1", until)
    assert not await ledger.use("q1", until)
    assert await ledger.use("q2", until)


async def test_expired_ids_are_dropped_as_new_ones_come() -> None:
    ledger = MemoryLedger()
    past = time.time() - 1
    for n in range(1000):
        assert await ledger.use(f"old-{n}", past)
    assert await ledger.use("new", time.time() + 600)
    assert len(ledger) == 1


async def test_a_redis_ledger_uses_an_id_once_for_every_replica(redis: Any) -> None:
    one, two = RedisLedger(redis.url), RedisLedger(redis.url)
    until = time.time() + 600
    try:
        assert await one.use("q1", until)
        assert not await two.use("q1", until)
        assert not await one.use("q1", until)
        assert await two.use("q2", until)
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_redis_ledger_keeps_an_id_as_long_as_its_state_lives(redis: Any) -> None:
    ledger, client = RedisLedger(redis.url), Redis.from_url(redis.url)
    try:
        assert await ledger.use("q1", time.time() + 600)
        assert await ledger.use("q2", time.time() - 5)  # an expired state's id: kept a moment, never forever
        lives = [await client.ttl("agentify:answer:q1"), await client.ttl("agentify:answer:q2")]
    finally:
        await ledger.aclose()
        await client.aclose()
    assert 590 <= lives[0] <= 601  # whole seconds, rounded up
    assert lives[1] <= 2  # two seconds at most, from the next whole one (-2: gone already)


async def test_a_redis_ledger_that_cannot_reach_redis_refuses_the_answer(redis: Any) -> None:
    ledger = RedisLedger(redis.url)
    redis.stop()
    try:
        with pytest.raises(Denied) as refused:
            await ledger.use("q1", time.time() + 600)
    finally:
        await ledger.aclose()
    assert "cannot be reached" in refused.value.message and "nothing was run" in refused.value.message


def test_state_keys_come_in_order_and_blank_means_none() -> None:
    first, second = hashlib.sha256(b"first").hexdigest(), hashlib.sha256(b"second").hexdigest()
    assert state_keys({STATE_KEYS_ENV: f" {first} ,{second},"}) == [first, second]
    assert state_keys({STATE_KEYS_ENV: " , "}) is None
    assert state_keys({}) is None


KEY = hashlib.sha256(b"a state key").hexdigest()


def test_a_short_state_key_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError) as refused:
        state_keys({STATE_KEYS_ENV: KEY + ",short-secret"})
    assert "key 2 of 2 is 12 bytes" in str(refused.value)
    assert "short-secret" not in str(refused.value)
    with pytest.raises(ConfigError, match="names one key twice"):
        state_keys({STATE_KEYS_ENV: KEY + "," + KEY})


def test_questions_sealed_by_one_key_ring_open_under_its_rotation() -> None:
    old, new = "o" * 32, "n" * 32
    sealed = Questions(keys=(old,)).security().codec.seal(b"state")
    assert Questions(keys=(new, old)).security().codec.unseal(sealed) == b"state"
    with pytest.raises(InvalidRequestState):
        Questions(keys=(new,)).security().codec.unseal(sealed)
