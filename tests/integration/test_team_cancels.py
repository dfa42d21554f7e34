"""A cancel that reaches another replica than the one running the call (DESIGN.md, cancellation and the team
gateway's isolation): two replicas behind HAProxy with Redis, as `scripts/team.sh` runs them.

The call is the official Python client's, through HAProxy, in both eras. Its cancel is what other clients
send: a `notifications/cancelled` POST of its own (2026-07-28: no session, so HAProxy sends it anywhere;
2025-11-25: the session's id, sent elsewhere once HAProxy lost track of the session). The test sends it
straight to the replica that does not run the call, which the backend names (its parent process).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.exceptions import MCPError

from tests.conftest import error_code, fake_backend, text_of, wait_until, write_config
from tests.integration.cluster import Team, team
from tests.integration.ide_client import ERAS, MODES, ts_client
from tests.integration.team import Answer, add_token, http_client, request

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
RUNS = re.compile(r"^parent (\d+) runs slow$", re.MULTILINE)
READS = re.compile(r"^parent (\d+) reads slowly$", re.MULTILINE)
PREFIX = "demo://team"


def _runs(marker: Path, slow: Slow | None = None) -> list[int]:
    """The replicas (pids) that ran each slow request (a tool call unless `slow` says), in order."""
    return [int(pid) for pid in (slow or CALL).runs.findall(marker.read_text())]


@dataclass(frozen=True)
class Slow:
    """A slow request to the fake backend: its method, how the backend marks which replica runs it and that it
    was cancelled, and how the client starts it (for some seconds)."""

    method: str
    runs: re.Pattern[str]
    cancelled: str
    start: Callable[[Any, float], Awaitable[Any]]


CALL = Slow(
    "tools/call",
    RUNS,
    "cancelled slow\n",
    lambda client, seconds: client.call_tool("call_tool", {"name": "fake__slow", "arguments": {"seconds": seconds}}),
)
READ = Slow(
    "resources/read",
    READS,
    "cancelled read\n",
    lambda client, seconds: client.read_resource(f"{PREFIX}/slow/{seconds}"),
)


async def _setup(tmp_path: Path, *people: str) -> tuple[Path, Path, list[str]]:
    """The fake backend's marker file, the config (the backend with resources under PREFIX, a tokens file), and
    a token for each of `people`."""
    marker = tmp_path / "backend.log"
    server = {"auth": {"type": "tokens", "file": "tokens.json"}}
    backends = [fake_backend("fake", "--marker", str(marker), "--resources", PREFIX)]
    config = write_config(tmp_path, backends, planner={"provider": "offline"}, server=server)
    return marker, config, [await add_token(tmp_path / "tokens.json", person) for person in people]


@dataclass
class Sent:
    """The requests a client sent: each one's method, JSON-RPC id and session (None: 2026-07-28)."""

    requests: list[tuple[str, str | int, str | None]] = field(default_factory=list)

    async def hear(self, sent: httpx2.Request) -> None:
        try:
            body = json.loads(sent.content)
        except ValueError:
            return
        if isinstance(body, dict) and "id" in body and isinstance(body.get("method"), str):
            self.requests.append((body["method"], body["id"], sent.headers.get("mcp-session-id")))

    def last(self, method: str) -> tuple[str | int, str | None]:
        """The id and session of the last `method` request sent."""
        return next((rid, sid) for m, rid, sid in reversed(self.requests) if m == method)


@asynccontextmanager
async def calling(url: str, token: str, mode: str) -> AsyncIterator[tuple[Any, Sent]]:
    """The official client (`team.http_client`), with the calls it sends recorded."""
    sent = Sent()
    async with http_client(url, token, mode, on_request=sent.hear) as client:
        yield client, sent


def cancel(url: str, token: str, mode: str, request_id: str | int, session: str | None) -> Answer:
    """A client's `notifications/cancelled` as a POST of its own, straight to one replica (blocking)."""
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    if session is not None:
        return request("POST", url, token, body, session=session)
    return _post_modern(url, token, body)


def _post_modern(url: str, token: str, body: dict[str, Any]) -> Answer:
    headers = {"MCP-Protocol-Version": ERAS["auto"], "Authorization": f"Bearer {token}"}
    answer = httpx2.post(url, json=body, headers=headers | {"Accept": "application/json, text/event-stream"})
    return Answer(answer.status_code, dict(answer.headers), {})


async def test_a_cancel_sent_to_another_replica_ends_the_call_and_only_its_owners_cancel_does(tmp_path: Path) -> None:
    marker, config, (alice, bob) = await _setup(tmp_path, "alice", "bob")
    seen: dict[str, Any] = {}
    async with team(config, tmp_path / "logs", replicas=2) as member:
        for mode in MODES:
            async with calling(member.url, alice, mode) as (client, sent):
                seen |= await _bobs_then_alices_cancel(client, sent, marker, member, mode, alice, bob)
                if mode == "auto":  # and at the replica that runs it, which the SDK alone would have dropped
                    heard = _cancels(marker)
                    seen["auto cancelled here"], _ = await _cancelled_by(
                        client,
                        sent,
                        marker,
                        member,
                        60,
                        lambda at, rid, sid: cancel(at, alice, "auto", rid, sid),
                        at="running",
                    )
                    await _heard_since(marker, heard)
            seen[f"{mode} backend"] = _cancels(marker)
    for mode in MODES:
        finished, cancelled = seen[f"{mode} finished"], seen[f"{mode} cancelled"]
        assert not finished.is_error and text_of(finished) == "slept 8.0", (mode, text_of(finished))
        assert error_code(cancelled) == "cancelled", (mode, text_of(cancelled))
        # Where Alice's session lives, the SDK answers Bob as if there were no such session; elsewhere, 202.
        bobs = [answer.status for answer in seen[f"{mode} bob"]]
        assert bobs == ([202, 404] if mode == "legacy" else [202, 202]), (mode, bobs)
        assert [answer.status for answer in seen[f"{mode} alice"]] == [202], seen[f"{mode} alice"]
    assert error_code(seen["auto cancelled here"]) == "cancelled", text_of(seen["auto cancelled here"])
    # The backend itself was told of Alice's cancels (one in 2025-11-25, two in 2026-07-28), never of Bob's.
    assert (seen["legacy backend"], seen["auto backend"]) == (1, 3), marker.read_text()


async def test_a_cancel_of_a_slow_read_sent_to_another_replica_ends_it_and_only_its_owners_cancel_does(
    tmp_path: Path,
) -> None:
    """As for tool calls: every request that reaches a backend is booked, here a `resources/read`."""
    marker, config, (alice, bob) = await _setup(tmp_path, "alice", "bob")
    seen: dict[str, Any] = {}
    async with team(config, tmp_path / "logs", replicas=2) as member:
        for mode in MODES:
            async with calling(member.url, alice, mode) as (client, sent):
                seen |= await _bobs_then_alices_cancel(client, sent, marker, member, mode, alice, bob, READ)
            seen[f"{mode} backend"] = _cancels(marker, READ)
    for mode in MODES:
        finished, cancelled = seen[f"{mode} finished"], seen[f"{mode} cancelled"]
        assert isinstance(finished, types.ReadResourceResult), (mode, finished)
        assert [c.text for c in finished.contents if isinstance(c, types.TextResourceContents)] == [
            f"{PREFIX} reads {PREFIX}/slow/8"
        ], (mode, finished)
        assert isinstance(cancelled, MCPError), (mode, cancelled)
        assert cancelled.error.code == REQUEST_CANCELLED, (mode, cancelled.error)
        assert "the client cancelled this request" in cancelled.error.message, (mode, cancelled.error)
        bobs = [answer.status for answer in seen[f"{mode} bob"]]
        assert bobs == ([202, 404] if mode == "legacy" else [202, 202]), (mode, bobs)
        assert [answer.status for answer in seen[f"{mode} alice"]] == [202], seen[f"{mode} alice"]
    # The backend was told of Alice's cancel of her read in each era, never of Bob's.
    assert (seen["legacy backend"], seen["auto backend"]) == (1, 2), marker.read_text()


async def _bobs_then_alices_cancel(
    client: Any, sent: Sent, marker: Path, member: Team, mode: str, alice: str, bob: str, slow: Slow = CALL
) -> dict[str, Any]:
    """Bob names Alice's slow request (and her session) at both replicas: nothing happens to it ("<mode> finished",
    and the answers to his cancels, "<mode> bob"). Then Alice's own cancel, at the replica that does not run her
    next one, ends it ("<mode> cancelled", "<mode> alice")."""
    seen: dict[str, Any] = {}
    seen[f"{mode} finished"], seen[f"{mode} bob"] = await _cancelled_by(
        client, sent, marker, member, 8, lambda at, rid, sid: cancel(at, bob, mode, rid, sid), at="both", slow=slow
    )
    heard = _cancels(marker, slow)
    seen[f"{mode} cancelled"], seen[f"{mode} alice"] = await _cancelled_by(
        client, sent, marker, member, 60, lambda at, rid, sid: cancel(at, alice, mode, rid, sid), slow=slow
    )
    await _heard_since(marker, heard, slow)
    return seen


async def _cancelled_by(
    client: Any,
    sent: Sent,
    marker: Path,
    member: Team,
    seconds: float,
    send_cancel: Any,
    at: str = "other",
    slow: Slow = CALL,
) -> tuple[Any, list[Answer]]:
    """A slow request through HAProxy (a tool call unless `slow` says); once the backend runs it,
    `send_cancel(replica URL, id, session)` to the replica that does not run it (`at` "other"), to the one that
    does ("running"), or to both, in that order. Returns the request's result (or the MCPError it raised) and
    the answers to the cancels."""
    runs_before = len(_runs(marker, slow))
    outcome: dict[str, Any] = {}
    answers: list[Answer] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            try:
                outcome["result"] = await slow.start(client, seconds)
            except MCPError as exc:
                outcome["result"] = exc

        tg.start_soon(run)
        await wait_until(lambda: len(_runs(marker, slow)) > runs_before, 60)
        running = _runs(marker, slow)[-1]
        assert running in member.replicas, (running, member.replicas)
        others = [url for pid, url in member.replicas.items() if pid != running]
        targets = (others if at != "running" else []) + ([member.replicas[running]] if at != "other" else [])
        request_id, session = sent.last(slow.method)
        for url in targets:
            answers.append(await anyio.to_thread.run_sync(send_cancel, url, request_id, session))
    return outcome["result"], answers


async def test_an_official_clients_own_cancel_through_haproxy_reaches_the_backend_at_once(tmp_path: Path) -> None:
    """The SDK's cancel: in 2025-11-25 a notification in the session (HAProxy sticks it to the call's
    replica); in 2026-07-28 the call's response stream closed, which HAProxy passes on at once
    (`option abortonclose`; without it, only when the replica's keep-alive fails, 30 s later)."""
    marker, config, (alice,) = await _setup(tmp_path, "alice")
    heard: dict[str, int] = {}
    async with team(config, tmp_path / "logs", replicas=2) as member:
        for mode in MODES:
            async with http_client(member.url, alice, mode) as client:
                heard[mode] = await _cancels_heard_after_own_cancel(client, marker)
                after = await client.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "next"}})
                assert text_of(after) == "echo: next", text_of(after)
    assert heard == dict.fromkeys(MODES, 1), heard


async def _cancels_heard_after_own_cancel(client: Any, marker: Path) -> int:
    """Starts a slow call, cancels it the SDK's way once the backend runs it, and counts the cancels the
    backend heard within 10 s (well under the 30 s one took without abortonclose)."""
    runs_before, cancels_before = len(_runs(marker)), _cancels(marker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "call_tool", {"name": "fake__slow", "arguments": {"seconds": 120}})
        await wait_until(lambda: len(_runs(marker)) > runs_before, 60)
        tg.cancel_scope.cancel()
    await _heard_since(marker, cancels_before)
    return _cancels(marker) - cancels_before


def _cancels(marker: Path, slow: Slow = CALL) -> int:
    """How many of the backend's slow requests (tool calls unless `slow` says) were cancelled."""
    return marker.read_text().count(slow.cancelled)


async def _heard_since(marker: Path, before: int, slow: Slow = CALL) -> None:
    """Waits (10 s at most) until the backend heard a cancel more than `before`: it may hear one after the client
    had its answer, and it is another process."""
    await wait_until(lambda: _cancels(marker, slow) > before, 10)


def _both_heard(marker: Path, before: tuple[int, int]) -> bool:
    """Whether the backend has heard a cancel of a call and of a read since it had heard `before` of each."""
    return _cancels(marker, CALL) > before[0] and _cancels(marker, READ) > before[1]


async def test_the_typescript_clients_abort_through_haproxy_reaches_the_backend_in_both_eras(tmp_path: Path) -> None:
    """The official TypeScript client (@modelcontextprotocol/client, tests/ts_client.mjs) aborts a slow call and
    a slow read with an AbortSignal, through HAProxy to three replicas and Redis (`scripts/team.sh`): in
    2025-11-25 it POSTs `notifications/cancelled` in the session (HAProxy sticks it to the request's replica); in
    2026-07-28 it sends no notification and aborts the request's own fetch (HAProxy's `abortonclose` tells the
    replica). Either way the backend work stops within seconds."""
    marker, config, (alice,) = await _setup(tmp_path, "alice")
    answers: dict[str, dict[str, Any]] = {}
    heard: dict[str, tuple[int, int]] = {}
    async with team(config, tmp_path / "logs") as member:
        for mode in MODES:
            before = (_cancels(marker, CALL), _cancels(marker, READ))
            aborts = [
                _aborted(
                    CALL,
                    marker,
                    {"name": "call_tool", "arguments": {"name": "fake__slow", "arguments": {"seconds": 120}}},
                ),
                _aborted(READ, marker, {"uri": f"{PREFIX}/slow/120"}),
            ]
            spec = {"url": member.url, "token": alice, "mode": mode, "elicitation": None, "calls": [], "aborts": aborts}
            answers[mode] = await ts_client(spec, seconds=150)
            await wait_until(partial(_both_heard, marker, before), 10)  # the backend is another process
            heard[mode] = (_cancels(marker, CALL) - before[0], _cancels(marker, READ) - before[1])
    for mode in MODES:
        answer = answers[mode]
        assert len(answer["aborted"]) == 2 and "answered" not in answer["aborted"], answer["aborted"]
        sent = [entry for entry in answer["sent"] if entry["method"] in (CALL.method, READ.method)]
        assert [entry["method"] for entry in sent] == [CALL.method, READ.method], answer["sent"]
        notified = [entry for entry in answer["sent"] if entry["method"] == "notifications/cancelled"]
        if mode == "legacy":  # a notification of its own in the session
            assert len(notified) == 2 and all(entry["session"] for entry in notified), answer["sent"]
        else:  # no notification: the requests' own fetches are aborted
            assert notified == [] and all(entry["aborted"] for entry in sent), answer["sent"]
    assert heard == dict.fromkeys(MODES, (1, 1)), (heard, marker.read_text())


def _aborted(slow: Slow, marker: Path, params: dict[str, Any]) -> dict[str, Any]:
    """What tests/ts_client.mjs sends and aborts: `slow` with `params`, once the backend runs one more of them."""
    when = {"file": str(marker), "pattern": slow.runs.pattern, "count": len(_runs(marker, slow)) + 1}
    return {"method": slow.method, "params": params, "when": when}
