"""Rate limits per principal and per backend, counted in memory or in a real redis-server, and what
happens when that Redis goes away (server.limits.whenRedisDown)."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from agentify.config.server import LimitsConfig
from agentify.errors import RateLimited
from agentify.team.limits import REDIS_SECONDS, Limiter

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def limiter(redis_url: str | None = None, **limits: Any) -> AsyncIterator[Limiter]:
    one = Limiter(LimitsConfig.model_validate(limits), redis_url)
    try:
        yield one
    finally:
        await one.aclose()


async def test_a_principal_over_its_limit_is_refused_with_the_seconds_to_wait() -> None:
    async with limiter(perPrincipal="2/minute") as limits:
        await limits.charge_principal("alice")
        await limits.charge_principal("alice")
        with pytest.raises(RateLimited) as refused:
            await limits.charge_principal("alice")
        await limits.charge_principal("bob")  # each principal counts alone
    assert 0 < refused.value.retry_after_seconds <= 60
    assert "'alice' is over the limit of 2 per minute" in refused.value.message
    assert f"Try again in {refused.value.retry_after_seconds} s" in refused.value.message


async def test_a_backend_over_its_limit_is_refused_whoever_calls() -> None:
    async with limiter(perBackend={"fs": "1/second"}) as limits:
        await limits.charge_backend("fs")
        with pytest.raises(RateLimited, match="backend 'fs' is over its limit of 1 per second"):
            await limits.charge_backend("fs")
        await limits.charge_backend("other")  # no limit of its own
        await limits.charge_principal("alice")  # no per-principal limit


async def test_counts_in_redis_are_shared_by_every_gateway_that_uses_it(redis: Any) -> None:
    async with limiter(redis.url, perPrincipal="3/minute") as one, limiter(redis.url, perPrincipal="3/minute") as two:
        await one.charge_principal("alice")
        await two.charge_principal("alice")
        await one.charge_principal("alice")
        with pytest.raises(RateLimited):
            await two.charge_principal("alice")
        await two.charge_principal("bob")
    assert one.where == redis.url


async def test_a_refusal_in_redis_says_how_long_to_wait_and_counts_go_on_after_redis_restarts(redis: Any) -> None:
    async with limiter(redis.url, perPrincipal="2/minute") as limits:
        await limits.charge_principal("alice")
        await limits.charge_principal("alice")
        with pytest.raises(RateLimited) as refused:  # the library reads the window the counts were written to
            await limits.charge_principal("alice")
        assert 0 < refused.value.retry_after_seconds <= 60
        redis.stop()
        redis.start()  # empty: no counts and no script; the old connection is gone
        counted = 0
        with pytest.raises(RateLimited):
            for _ in range(4):  # the first may find the old connection closed (Redis down: counted nothing)
                await limits.charge_principal("alice")
                counted += 1
        assert counted in (2, 3)


async def test_a_count_given_up_mid_way_leaves_the_next_counts_their_own_answers(redis: Any) -> None:
    async with limiter(redis.url, perPrincipal="1/minute") as limits:
        await limits.charge_principal("alice")
        given_up = anyio.CancelScope()

        async def alice_again() -> None:
            with given_up:
                await limits.charge_principal("alice")  # Redis answers "no room": an answer nobody waits for

        async with anyio.create_task_group() as tg:
            tg.start_soon(alice_again)
            await anyio.lowlevel.checkpoint()  # her count is sent
            given_up.cancel()
            await limits.charge_principal("bob")  # bob gets his own answer, room, not hers
        assert given_up.cancelled_caught
        with pytest.raises(RateLimited, match="'bob' is over"):
            await limits.charge_principal("bob")
        with pytest.raises(RateLimited, match="'alice' is over"):
            await limits.charge_principal("alice")


async def test_a_redis_that_hangs_counts_as_down_within_the_deadline_and_counts_go_on_after(redis: Any) -> None:
    async with limiter(redis.url, perPrincipal="1/minute") as limits:
        await limits.charge_principal("carol")  # connected, the script loaded
        os.kill(redis.pid, signal.SIGSTOP)
        try:
            with anyio.fail_after(REDIS_SECONDS + 1):  # whenRedisDown allow: each runs uncounted at its deadline
                async with anyio.create_task_group() as tg:
                    for name in ("alice", "alice", "dave"):
                        tg.start_soon(limits.charge_principal, name)
        finally:
            os.kill(redis.pid, signal.SIGCONT)
        await limits.charge_principal("bob")  # connected again, and bob's own answers
        with pytest.raises(RateLimited, match="'bob' is over"):
            await limits.charge_principal("bob")
        with pytest.raises(RateLimited, match="'carol' is over"):
            await limits.charge_principal("carol")


@pytest.mark.parametrize("policy", ["allow", "refuse"])
async def test_redis_down_allows_or_refuses_as_configured(redis: Any, policy: str) -> None:
    async with limiter(redis.url, perPrincipal="100/minute", whenRedisDown=policy) as limits:
        await limits.charge_principal("alice")
        redis.stop()
        if policy == "allow":
            await limits.charge_principal("alice")
            return
        with pytest.raises(RateLimited) as refused:
            await limits.charge_principal("alice")
    assert "cannot be reached, and server.limits.whenRedisDown is refuse" in refused.value.message
    assert refused.value.retry_after_seconds > 0


async def test_without_limits_nothing_is_counted_or_stored() -> None:
    async with limiter() as limits:
        for _ in range(1000):
            await limits.charge_principal("alice")
            await limits.charge_backend("fs")


async def test_a_changed_config_applies_from_the_next_call_and_a_changed_limit_counts_afresh() -> None:
    async with limiter(perPrincipal="2/minute") as limits:
        await limits.charge_principal("alice")
        await limits.charge_principal("alice")
        with pytest.raises(RateLimited):
            await limits.charge_principal("alice")
        limits.configure(LimitsConfig.model_validate({"perPrincipal": "3/minute"}))
        for _ in range(3):  # a new limit is a new window (the library keys its counts by the limit)
            await limits.charge_principal("alice")
        with pytest.raises(RateLimited, match="over the limit of 3 per minute"):
            await limits.charge_principal("alice")
        limits.configure(LimitsConfig())
        for _ in range(10):
            await limits.charge_principal("alice")  # no limit any more
        limits.configure(LimitsConfig.model_validate({"perBackend": {"fs": "1/minute"}}))
        await limits.charge_backend("fs")
        with pytest.raises(RateLimited):
            await limits.charge_backend("fs")


async def test_limits_added_by_a_change_to_a_gateway_started_without_any_count_from_then_on() -> None:
    async with limiter() as limits:
        await limits.charge_principal("alice")
        limits.configure(LimitsConfig.model_validate({"perPrincipal": "1/minute"}))
        await limits.charge_principal("alice")
        with pytest.raises(RateLimited):
            await limits.charge_principal("alice")
    assert limits.where == "memory"
