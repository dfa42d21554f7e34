"""In-process tests of the console's pure parts: the event pump, the access rules, the token."""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import anyio
import pytest
from starlette.requests import HTTPConnection

from agentify.console.security import Access, presented_token, token_subprotocol
from agentify.console.stream import FELL_BEHIND, STALLED, pump
from agentify.console.supervisor import console_token
from agentify.console.views import bounded_result
from agentify.gateway.events import EventBus
from agentify.security.bodies import BodyLimit
from agentify.security.redact import Redactor


@pytest.mark.anyio
async def test_a_reader_that_falls_behind_is_dropped_while_publishing_never_waits() -> None:
    bus = EventBus()
    events = bus.subscribe(buffer=10)
    for n in range(50):  # synchronous: the 11th event finds the reader's buffer full and drops it
        bus.publish("log", {"n": n, "message": "key sk-abcdefghijklmnop"})
    late = bus.subscribe()
    bus.publish("log", {"n": 50, "message": "after"})
    sent: list[dict[str, Any]] = []

    async def send(text: str) -> None:
        sent.append(json.loads(text))

    with anyio.fail_after(5), events, late:
        reason = await pump(events, send, Redactor().data, first={"kind": "snapshot"})
        assert late.receive_nowait().data["n"] == 50  # the others are not affected
    bus.publish("log", {"n": 51})  # lets the bus let go of the closed readers
    assert reason == FELL_BEHIND
    assert sent[0] == {"kind": "snapshot"}
    assert [event["data"]["n"] for event in sent[1:]] == list(range(10))
    assert sent[1]["data"]["message"] == "key sk-[REDACTED]"


@pytest.mark.anyio
async def test_a_send_that_stalls_ends_the_stream_in_bounded_time() -> None:
    bus = EventBus()
    events = bus.subscribe()
    bus.publish("log", {"message": "one"})

    async def never_drains(text: str) -> None:
        await anyio.Event().wait()

    with anyio.fail_after(5), events:
        assert await pump(events, never_drains, Redactor().data, seconds=0.05) == STALLED
    bus.publish("log", {"message": "two"})  # never blocks, and lets the bus let go of the closed reader


def test_only_the_console_own_names_pass_the_host_check_on_loopback() -> None:
    access = Access(token="t" * 32, host="127.0.0.1", port=8123)
    assert all(access.host_allowed(h) for h in ("127.0.0.1:8123", "localhost:8123", "[::1]:8123", "LocalHost:8123"))
    refused = ("evil.example:8123", "127.0.0.1", "127.0.0.1:8124", "192.0.2.7:8123", "", None)
    assert not any(access.host_allowed(h) for h in refused)
    assert access.loopback and Access("t", "::1", 1).loopback and Access("t", "localhost", 1).loopback


def test_off_loopback_only_the_configured_name_passes_and_no_other_address() -> None:
    wildcard = Access(token="t" * 32, host="0.0.0.0", port=8123)
    assert wildcard.host_allowed(f"{socket.gethostname()}:8123") and wildcard.host_allowed("127.0.0.1:8123")
    refused = ("192.0.2.7:8123", "[2001:db8::1]:8123", "evil.example:8123", "0.0.0.0:8123", "192.0.2.7:9999")
    assert not any(wildcard.host_allowed(h) for h in refused)
    assert not wildcard.origin_allowed("http://192.0.2.7:8123")
    assert wildcard.base_url == "http://127.0.0.1:8123/"
    named = Access(token="t" * 32, host="console.lan.example", port=8123)
    assert named.host_allowed("console.lan.example:8123") and named.host_allowed("Console.LAN.example:8123")
    assert named.origin_allowed("http://console.lan.example:8123")
    assert not named.host_allowed("192.0.2.7:8123") and not named.host_allowed("other.lan.example:8123")
    assert not wildcard.loopback and not named.loopback


def test_origins_must_be_the_console_itself() -> None:
    access = Access(token="t" * 32, host="::1", port=8123)
    assert access.origin_allowed("http://[::1]:8123") and access.origin_allowed("http://localhost:8123")
    assert not any(access.origin_allowed(o) for o in ("null", "http://evil.example", "https://localhost:8123"))
    assert access.base_url == "http://[::1]:8123/"


def test_the_url_carries_the_token_quoted() -> None:
    access = Access(token="a b/c+d&e", host="127.0.0.1", port=8123)
    assert access.url_with_token == "http://127.0.0.1:8123/?token=a%20b%2Fc%2Bd%26e"
    assert access.token_matches("a b/c+d&e") and not access.token_matches("a b/c+d&")


def test_any_token_travels_as_a_header_safe_subprotocol_and_comes_back_whole() -> None:
    for token in ("a b/c+d&e", "ünïcode-tökén-0123456789", "x" * 200, "plain_token-0123456789"):
        offered = token_subprotocol(token)
        assert re.fullmatch(r"agentify-token\.[A-Za-z0-9_-]+", offered), offered  # RFC 7230 token characters
        scope = {"type": "websocket", "headers": [], "subprotocols": ["agentify-console", offered]}
        assert presented_token(HTTPConnection(scope)) == token
    garbled = {"type": "websocket", "headers": [], "subprotocols": ["agentify-token.\u00e9%"]}
    assert not Access("t" * 32, "127.0.0.1", 1).token_matches(presented_token(HTTPConnection(garbled)) or "")
    plain_http = {"type": "http", "headers": [], "subprotocols": [token_subprotocol("t" * 32)]}
    assert presented_token(HTTPConnection(plain_http)) is None


def test_the_token_comes_from_the_environment_unless_it_is_too_short_to_be_safe() -> None:
    assert console_token({"AGENTIFY_DEBUG_TOKEN": "a-long-enough-token-123"}) == "a-long-enough-token-123"
    short = console_token({"AGENTIFY_DEBUG_TOKEN": "guessable"})
    random_one, another = console_token({}), console_token({})
    assert short != "guessable" and len(short) >= 32
    assert random_one != another and len(random_one) >= 32


async def _drive(limit: int, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[int, int, list[bytes]]:
    """One HTTP request through `BodyLimit` in front of an app that reads one message:
    (status, how many chunks were pulled from the client, the bodies the app saw)."""
    pulled = 0
    seen: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        assert message["more_body"] is False
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        if pulled > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[pulled - 1], "more_body": pulled < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/tasks", "headers": headers, "query_string": b""}
    with anyio.fail_after(5):
        await BodyLimit(app, limit=limit)(scope, receive, send)
    return sent[0]["status"], pulled, seen


@pytest.mark.anyio
async def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_cap_and_the_rest_is_never_pulled() -> None:
    status, pulled, bodies = await _drive(1000, [], [b"x" * 400] * 100)
    assert status == 413 and pulled == 3 and bodies == []
    status, pulled, bodies = await _drive(1000, [(b"content-length", b"50000000")], [b"x" * 400] * 100)
    assert status == 413 and pulled == 0 and bodies == []
    status, _, bodies = await _drive(1000, [], [b"a" * 400, b"b" * 400, b"c" * 200])
    assert status == 200 and bodies == [b"a" * 400 + b"b" * 400 + b"c" * 200]  # within the cap: whole, in one


def test_a_result_is_cut_to_its_bound_with_notes_and_oversized_blocks_left_out() -> None:
    image = {"type": "image", "data": "A" * 5000, "mimeType": "image/png"}
    result = {
        "content": [{"type": "text", "text": "a" * 60}, image, {"type": "text", "text": "b" * 60}],
        "structuredContent": {"content": "a" * 120},
        "isError": False,
        "_meta": {"agentify/plan": {"traceId": "t"}},
    }
    bounded = bounded_result(result, 100)
    texts = [block.get("text", "") for block in bounded["content"]]
    assert texts[0] == "a" * 60
    assert texts[1] == f"[agentify console: image content of {len(json.dumps(image))} characters not shown]"
    assert texts[2] == "b" * 40 + "\n[agentify console: 20 of 60 characters not shown]"
    assert texts[3] == "[agentify console: structuredContent too large to show]"
    assert "structuredContent" not in bounded and bounded["_meta"] == result["_meta"]
    small = {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"x": 1}}
    assert bounded_result(small, 100) == small
