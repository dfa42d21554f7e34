"""The ledger of used answers: each id once, and memory given back as states expire."""

from __future__ import annotations

import time

import pytest

from agentify.mcp_server.answer_ledger import MemoryLedger

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
