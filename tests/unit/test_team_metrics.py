"""`GET /metrics` in process (a real ASGI call of the route): who may read it, and labels that no client
can multiply."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from agentify.team.drain import BackendReadiness, Replica
from agentify.team.metrics import Metrics
from agentify.team.operations import Operation

pytestmark = pytest.mark.anyio


async def scrape(metrics: Metrics, client: str = "127.0.0.1", headers: dict[str, str] | None = None) -> tuple[int, str]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "client": (client, 50000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    await metrics.route(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


def call(tool: str | None, outcome: str = "ok", decision: str = "allowed", target: str | None = None) -> Operation:
    return Operation(
        time=time.time(),
        method="tools/call",
        principal="alice",
        client=None,
        operation="call_tool",
        target=target or f"fake__{tool}",
        arguments={},
        decision=decision,  # type: ignore[arg-type]
        outcome=outcome,
        duration_ms=12.0,
        trace_id=None,
        backend="fake" if tool else None,
        tool=tool,
    )


async def test_calls_refusals_and_the_replicas_state_are_counted() -> None:
    replica = Replica()
    replica.statuses = lambda: [BackendReadiness("fake", "ready", True), BackendReadiness("fs", "failed", True)]
    metrics = Metrics(replica, None)
    metrics.operation(call("echo"))
    metrics.operation(call("echo", "tool_error"))
    for n in range(50):  # names a client made up never become labels
        metrics.operation(call(None, "rate_limited", "rate_limited", target=f"made_up__{n}"))
    status, text = await scrape(metrics)
    assert status == 200
    assert 'agentify_tool_calls_total{backend="fake",outcome="ok",tool="echo"} 1.0' in text
    assert 'agentify_tool_calls_total{backend="fake",outcome="tool_error",tool="echo"} 1.0' in text
    assert 'agentify_tool_calls_total{backend="unknown",outcome="rate_limited",tool="unknown"} 50.0' in text
    assert text.count("agentify_tool_calls_total{") == 3
    assert 'agentify_refusals_total{kind="rate_limited"} 50.0' in text
    assert 'agentify_refusals_total{kind="unauthorized"} 0.0' in text
    assert 'agentify_backend_state{backend="fs",state="failed"} 1.0' in text
    assert "agentify_draining 0.0" in text and "agentify_open_sessions 0.0" in text


@pytest.mark.parametrize(
    ("client", "headers", "status"),
    [
        ("127.0.0.1", {}, 200),
        ("::1", {}, 200),
        ("192.0.2.7", {}, 403),
        ("127.0.0.1", {"X-Forwarded-For": "192.0.2.7"}, 403),  # through a proxy on this machine
    ],
)
async def test_without_a_token_only_this_machine_may_scrape(client: str, headers: dict[str, str], status: int) -> None:
    answer, body = await scrape(Metrics(None, None), client, headers)
    assert answer == status
    assert status == 200 or "AGENTIFY_METRICS_TOKEN" in body


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer not-it"}, 401),
        ({"Authorization": "Basic bWV0cmljcy10b2tlbi0wMTIzNDU2Nzg5"}, 401),
        ({"Authorization": "Bearer metrics-token-0123456789"}, 200),
        ({"Authorization": "bearer metrics-token-0123456789", "X-Forwarded-For": "192.0.2.7"}, 200),
    ],
)
async def test_with_a_token_every_scrape_must_send_it(headers: dict[str, str], status: int) -> None:
    answer, body = await scrape(Metrics(None, "metrics-token-0123456789"), "192.0.2.7", headers)
    assert answer == status
    assert "metrics-token-0123456789" not in body


def test_a_short_metrics_token_is_refused_at_start() -> None:
    from agentify._common.errors import ConfigError
    from agentify.team.metrics import metrics_token

    with pytest.raises(ConfigError, match="AGENTIFY_METRICS_TOKEN is 5 characters long; it needs at least 16"):
        metrics_token("short")
    assert metrics_token("") is None and metrics_token(None) is None
    assert metrics_token("metrics-token-0123456789") == "metrics-token-0123456789"
