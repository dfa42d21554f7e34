"""The drain gate in process, over a stand-in MCP app that tells the replica of its sessions as the SDK's
session manager does: while draining, a 2025-11-25 session the replica holds goes on, new work is refused
for the balancer to retry elsewhere, and the drain waits for the held sessions to end, which a 404 for
somebody else's use of a session id does not do."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentify.team.drain import Replica, ReplicaRoutes

pytestmark = pytest.mark.anyio
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
QUIET = 0.05
CALL = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}).encode()


def _mcp(replica: Replica) -> Any:
    """Opens session "s1" for alice on a request without one; answers her "s1" 200 (DELETE ends it); anything
    else, her session id sent by someone else included, 404 (as the SDK answers a credential that did not
    open the session)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        session, alice = headers.get(b"mcp-session-id"), headers.get(b"x-who", b"alice") == b"alice"
        status, reply = 404, []
        if session is None:
            status, reply = 200, [(b"mcp-session-id", b"s1")]
            replica.opened("s1")
        elif session == b"s1" and alice:
            status = 200
            if scope["method"] == "DELETE":
                replica.ended("s1")
        await send({"type": "http.response.start", "status": status, "headers": reply})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


async def _request(
    app: ReplicaRoutes, method: str, body: bytes, session: str | None = None, who: str = "alice"
) -> tuple[int, dict[str, str]]:
    headers = [(b"mcp-session-id", session.encode())] if session else []
    headers.append((b"x-who", who.encode()))
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers}
    started: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)

    await app(scope, receive, send)
    return started["status"], {k.decode(): v.decode() for k, v in started["headers"]}


async def test_a_held_session_goes_on_while_draining_and_new_work_is_refused_for_a_retry() -> None:
    replica = Replica(quiet_seconds=QUIET)
    app = ReplicaRoutes(_mcp(replica), replica)
    assert (await _request(app, "POST", INITIALIZE))[0] == 200  # opens s1 here
    drained = anyio.Event()

    async def drain() -> None:
        await replica.drain(30)
        drained.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await anyio.wait_all_tasks_blocked()
            follow_up = await _request(app, "POST", CALL, session="s1")
            newcomer = await _request(app, "POST", INITIALIZE)
            stranger = await _request(app, "POST", CALL, session="s9")
            mallory = await _request(app, "POST", CALL, session="s1", who="mallory")
            mallory_ends = await _request(app, "DELETE", b"", session="s1", who="mallory")
            await anyio.sleep(QUIET * 4)  # a drain that must not end shows only by waiting past its quiet time
            assert not drained.is_set()  # s1 is still held: mallory's 404s ended nothing
            ended = await _request(app, "DELETE", b"", session="s1")
            await drained.wait()
    assert follow_up[0] == 200 and ended[0] == 200
    assert mallory[0] == 404 and mallory_ends[0] == 404
    for status, headers in (newcomer, stranger):
        assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
