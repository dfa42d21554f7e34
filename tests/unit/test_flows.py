"""Authorizations in progress (`team/flows.py`): a start link works once and binds the browser that opened it;
the callback completes only the flow its `state` names, from that browser, once; across replicas through Redis
(the replica that made the flow sees the code another replica received)."""

from __future__ import annotations

from typing import Any

import pytest

from agentify.team.flows import Flows, MemoryKeys, RedisKeys

pytestmark = pytest.mark.anyio


async def _reached(flows: Flows, principal: str = "alice") -> str:
    flow_id = await flows.create(principal, "gh")
    await flows.reached(flow_id, "https://as.example/authorize?state=s-1", "s-1")
    return flow_id


async def test_a_start_link_works_once_and_binds_its_browser() -> None:
    flows = Flows(MemoryKeys())
    flow_id = await _reached(flows)
    assert await flows.pending("alice", "gh") == flow_id
    assert await flows.pending("bob", "gh") is None
    first = await flows.start(flow_id)
    assert first.status == 302 and first.location == "https://as.example/authorize?state=s-1" and first.cookie
    again = await flows.start(flow_id)
    assert again.status == 410 and again.location is None
    assert (await flows.start("no-such-flow")).status == 404


async def test_the_callback_completes_only_its_own_flow_from_its_own_browser_once() -> None:
    flows = Flows(MemoryKeys())
    flow_id = await _reached(flows)
    cookie = (await flows.start(flow_id)).cookie
    assert (await flows.callback({"state": "forged", "code": "c"}, cookie)).status == 400
    assert (await flows.callback({"state": "s-1", "code": "c"}, "another-browser")).status == 403
    assert (await flows.callback({"state": "s-1", "code": "c"}, None)).status == 403
    assert await flows.code(flow_id) is None
    assert (await flows.callback({"state": "s-1", "code": "c"}, cookie)).status == 200
    assert await flows.code(flow_id) == {"state": "s-1", "code": "c"}
    assert (await flows.callback({"state": "s-1", "code": "other"}, cookie)).status == 410
    await flows.finish(flow_id, None)
    outcome = await flows.outcome(flow_id)
    assert outcome is not None and outcome.error is None
    assert await flows.pending("alice", "gh") is None  # finished: the next need makes a new flow


async def test_replicas_share_flows_through_redis(redis: Any) -> None:
    one, two = Flows(RedisKeys(redis.url)), Flows(RedisKeys(redis.url))
    try:
        flow_id = await _reached(one)
        assert await two.pending("alice", "gh") == flow_id
        started = await two.start(flow_id)
        assert started.status == 302
        assert (await one.start(flow_id)).status == 410
        assert (await two.callback({"state": "s-1", "code": "c"}, started.cookie)).status == 200
        assert await one.code(flow_id) == {"state": "s-1", "code": "c"}
        await one.finish(flow_id, "the authorization server refused")
        outcome = await two.outcome(flow_id)
        assert outcome is not None and outcome.error == "the authorization server refused"
    finally:
        await one.aclose()
        await two.aclose()
