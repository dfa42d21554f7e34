"""Cancels between replicas (team/cancellations.py) over a real Redis: a cancel published by one replica ends
the call booked under its key at another and nothing else; the book keeps only calls in flight; a cancel
POST the relay does not understand goes on to the endpoint as it came."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from agentify.team.cancellations import CallBook, CancelChannel, CancelRelay, call_key, cancel_channel

pytestmark = pytest.mark.anyio


def _channel(url: str) -> CancelChannel:
    channel = cancel_channel(url)
    assert channel is not None
    return channel


async def test_a_cancel_published_at_one_replica_ends_only_the_call_of_its_key_at_another(redis: Any) -> None:
    one, two = _channel(redis.url), _channel(redis.url)
    ended: list[str] = []
    first_ended = anyio.Event()

    async def call(book: CallBook, key: str, name: str, *, task_status: Any) -> None:
        with book.running(key):
            task_status.started()
            await anyio.sleep(60)
        ended.append(name)
        first_ended.set()

    async with one.listening(), two.listening(), anyio.create_task_group() as tg:
        with anyio.fail_after(20):
            await one.subscribed.wait()
            await tg.start(call, one.book, call_key("alice", None, 7), "alice")
            await tg.start(call, one.book, call_key("bob", None, 7), "bob")  # the same id, another person
            await tg.start(call, one.book, call_key("alice", "session-1", 7), "alice in a session")
            await two.publish(call_key("alice", None, 7))
            await first_ended.wait()
        booked = len(one.book)
        tg.cancel_scope.cancel()
    assert ended == ["alice"] and booked == 2
    assert len(one.book) == 0  # every call left the book as it ended


async def test_a_cancel_while_redis_is_down_is_lost_and_raises_nothing(redis: Any) -> None:
    channel = _channel(redis.url)
    redis.stop()
    with anyio.fail_after(10):
        await channel.publish(call_key("alice", None, 1))
    async with channel.listening():  # the listener keeps trying, and stops with the body
        await anyio.sleep(0.2)


async def test_a_replica_hears_cancels_again_once_redis_is_back(redis: Any) -> None:
    channel, other = _channel(redis.url), _channel(redis.url)
    redis.stop()
    cancelled = anyio.Event()

    async def call(*, task_status: Any) -> None:
        with channel.book.running(call_key("alice", None, 1)) as scope:
            task_status.started()
            await anyio.sleep(60)
        if scope.cancelled_caught:
            cancelled.set()

    async with channel.listening(), other.listening(), anyio.create_task_group() as tg:
        await anyio.sleep(0.3)  # the listener found Redis gone and waits to try again
        assert not channel.subscribed.is_set()
        redis.start()  # the same port
        with anyio.fail_after(20):
            await channel.subscribed.wait()
            await tg.start(call)
            await other.publish(call_key("alice", None, 1))
            await cancelled.wait()


def test_the_key_depends_on_the_person_the_session_and_the_id() -> None:
    keys = {call_key("alice", None, 1), call_key("bob", None, 1), call_key("alice", "s", 1), call_key("alice", None, 2)}
    assert len(keys) == 4 and all(len(key) == 64 for key in keys)


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"nested": 1}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x" * 201}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "notifications/cancelled"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "notifications/cancelled"}},
        "notifications/cancelled",
    ],
)
async def test_what_is_no_cancel_goes_on_to_the_endpoint_as_it_came(body: Any) -> None:
    channel = CancelChannel(link=None, book=CallBook())  # type: ignore[arg-type]  # never reaches Redis here
    raw = json.dumps(body).encode()
    reached: list[bytes] = []

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        reached.append((await receive())["body"])

    relay = CancelRelay(endpoint, channel, holds=lambda session: False, path="/mcp")
    user = AuthenticatedUser(AccessToken(token="t", client_id="alice", scopes=[], subject="alice"))
    scope = {"type": "http", "method": "POST", "headers": [], "user": user, "path": "/mcp"}
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        raise AssertionError(f"the relay answered itself: {message}")

    await relay(scope, receive, send)
    assert reached == [raw]
