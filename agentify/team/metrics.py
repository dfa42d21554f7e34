"""`GET /metrics`: what a team's Prometheus scrapes from a replica (prometheus-client, its text format).

    agentify_tool_calls_total{backend,tool,outcome}              every tools/call, by the backend tool it
    agentify_tool_call_duration_seconds{backend,tool,outcome}    reached (`agentify` and the gateway's tool
                                                                 for its own; `unknown` when none resolved)
    agentify_refusals_total{kind}                                forbidden, rate_limited, withheld (operations
                                                                 refused), unauthorized (HTTP 401), and the
                                                                 HTTP 403 and 429 answers as forbidden and
                                                                 rate_limited
    agentify_backend_state{backend,state}                        1 for each backend's state now
    agentify_open_sessions                                       2025-11-25 sessions this replica holds
    agentify_requests_in_flight                                  MCP requests being handled
    agentify_draining                                            1 once SIGTERM started the drain

Labels come only from the config (backend and tool names the gateway resolved) and fixed sets (outcomes
are error codes), never from what a client sent, so no client can grow the series without end.

Who may read it: with `AGENTIFY_METRICS_TOKEN` set, a request with that token as `Authorization: Bearer`
(401 otherwise); without it, a request from a loopback address that no proxy forwarded (403 otherwise).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agentify._common.errors import ConfigError
from agentify.team.drain import Replica
from agentify.team.http_auth import MIN_TOKEN_CHARS, is_loopback
from agentify.team.operations import Operation

METRICS_PATH = "/metrics"
TOKEN_VARIABLE = "AGENTIFY_METRICS_TOKEN"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_REFUSALS = ("forbidden", "rate_limited", "withheld")
_HTTP_REFUSALS = {401: "unauthorized", 403: "forbidden", 429: "rate_limited"}
_FORWARDED = (b"x-forwarded-for", b"forwarded")


def metrics_token(value: str | None) -> str | None:
    """`AGENTIFY_METRICS_TOKEN` as set (None when unset or empty).

    Raises:
        ConfigError: it is shorter than MIN_TOKEN_CHARS (a scraper's token is guessed like any other)."""
    if value and len(value) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{TOKEN_VARIABLE} is {len(value)} characters long; it needs at least {MIN_TOKEN_CHARS}. Use a random "
            "one: python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return value or None


class Metrics:
    """The replica's metrics: an `OperationSink` for the calls, a watcher of the HTTP refusals, and the
    `/metrics` route. `token`: `AGENTIFY_METRICS_TOKEN` (None: loopback only)."""

    def __init__(self, replica: Replica | None, token: str | None) -> None:
        self._token = token.encode() if token else None
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("backend", "tool", "outcome")
        self._calls = Counter(
            "agentify_tool_calls", "Tool calls by backend tool and outcome.", labels, registry=self.registry
        )
        self._durations = Histogram(
            "agentify_tool_call_duration_seconds",
            "How long tool calls took, by backend tool and outcome.",
            labels,
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._refusals = Counter(
            "agentify_refusals", "Requests and operations refused, by kind.", ("kind",), registry=self.registry
        )
        for kind in (*_REFUSALS, "unauthorized"):
            self._refusals.labels(kind)  # every kind shows, at 0 until it happens
        if replica is not None:
            self.registry.register(_ReplicaState(replica))

    def operation(self, done: Operation) -> None:
        """An `OperationSink`."""
        if done.decision in _REFUSALS:
            self._refusals.labels(done.decision).inc()
        if done.method != "tools/call":
            return
        labels = (done.backend or "unknown", done.tool or "unknown", done.outcome)
        self._calls.labels(*labels).inc()
        self._durations.labels(*labels).observe(done.duration_ms / 1000)

    def counting(self, app: Any) -> Any:
        """`app` with its 401, 403 and 429 answers counted as refusals (the bearer check's, the back-off's)."""

        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return

            async def watched(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start" and (kind := _HTTP_REFUSALS.get(message["status"])):
                    self._refusals.labels(kind).inc()
                await send(message)

            await app(scope, receive, watched)

        return counted

    async def route(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI: `GET /metrics`."""
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"error": "method_not_allowed", "error_description": "use GET /metrics"})
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        body = generate_latest(self.registry)
        headers = [(b"content-type", CONTENT_TYPE_LATEST.encode()), (b"content-length", str(len(body)).encode())]
        headers.append((b"cache-control", b"no-store"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})

    def _refusal(self, scope: dict[str, Any]) -> tuple[int, dict[str, str], list[tuple[bytes, bytes]]] | None:
        headers = dict(scope.get("headers", ()))
        if self._token is not None:
            scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
            challenge = [(b"www-authenticate", b'Bearer realm="agentify-metrics"')]
            if scheme.lower() != b"bearer" or not given.strip():
                why = f"GET /metrics needs the metrics token: send it as Authorization: Bearer <{TOKEN_VARIABLE}>"
                return 401, {"error": "unauthorized", "error_description": why}, challenge
            if not hmac.compare_digest(given.strip(), self._token):
                why = f"this is not the metrics token ({TOKEN_VARIABLE} of the gateway)"
                return 401, {"error": "invalid_token", "error_description": why}, challenge
            return None
        client = scope.get("client")
        if client is None or not is_loopback(str(client[0])) or any(name in headers for name in _FORWARDED):
            why = (
                f"GET /metrics answers only this machine while {TOKEN_VARIABLE} is not set: set it on the gateway "
                "and send it as Authorization: Bearer to scrape from elsewhere (or through a proxy)"
            )
            return 403, {"error": "forbidden", "error_description": why}, []
        return None


class _ReplicaState(Collector):
    """Read at each scrape: the backends' states, the sessions held, the requests in flight, the drain."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def collect(self) -> Iterator[Metric]:
        replica = self._replica
        states = GaugeMetricFamily(
            "agentify_backend_state", "1 for the state each backend is in now.", labels=("backend", "state")
        )
        for backend in replica.statuses() if replica.statuses is not None else []:
            states.add_metric((backend.id, backend.state), 1)
        yield states
        yield GaugeMetricFamily(
            "agentify_open_sessions", "2025-11-25 sessions this replica holds.", value=replica.sessions_held
        )
        yield GaugeMetricFamily("agentify_requests_in_flight", "MCP requests being handled.", value=replica.in_flight)
        yield GaugeMetricFamily("agentify_draining", "1 once SIGTERM started the drain.", value=int(replica.draining))


async def _answer(
    send: Any, status: int, body: dict[str, str], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = json.dumps(body).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start + (headers or [])})
    await send({"type": "http.response.body", "body": data})
