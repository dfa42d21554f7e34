"""In-process tests of the console's pure parts: the event pump, the access rules, the token."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentify.console.security import Access
from agentify.console.stream import FELL_BEHIND, STALLED, pump
from agentify.console.supervisor import console_token
from agentify.events import EventBus
from agentify.redact import Redactor


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


def test_a_wildcard_bind_also_accepts_ip_addresses_but_no_foreign_names() -> None:
    access = Access(token="t" * 32, host="0.0.0.0", port=8123)
    assert access.host_allowed("192.0.2.7:8123") and access.host_allowed("[2001:db8::1]:8123")
    assert not access.host_allowed("evil.example:8123") and not access.host_allowed("192.0.2.7:9999")
    assert access.base_url == "http://127.0.0.1:8123/"
    assert not access.loopback and not Access("t", "myhost.example", 1).loopback


def test_origins_must_be_the_console_itself() -> None:
    access = Access(token="t" * 32, host="::1", port=8123)
    assert access.origin_allowed("http://[::1]:8123") and access.origin_allowed("http://localhost:8123")
    assert not any(access.origin_allowed(o) for o in ("null", "http://evil.example", "https://localhost:8123"))
    assert access.base_url == "http://[::1]:8123/"


def test_the_url_carries_the_token_quoted_and_the_cookie_is_per_port() -> None:
    access = Access(token="a b/c+d&e", host="127.0.0.1", port=8123)
    assert access.url_with_token == "http://127.0.0.1:8123/?token=a%20b%2Fc%2Bd%26e"
    assert access.cookie_name == "agentify_console_8123"
    assert access.token_matches("a b/c+d&e") and not access.token_matches("a b/c+d&")


def test_the_token_comes_from_the_environment_unless_it_is_too_short_to_be_safe() -> None:
    assert console_token({"AGENTIFY_DEBUG_TOKEN": "a-long-enough-token-123"}) == "a-long-enough-token-123"
    short = console_token({"AGENTIFY_DEBUG_TOKEN": "guessable"})
    random_one, another = console_token({}), console_token({})
    assert short != "guessable" and len(short) >= 32
    assert random_one != another and len(random_one) >= 32
