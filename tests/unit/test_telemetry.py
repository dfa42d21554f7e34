"""One tracing, in process: the task runner's spans as the SDK's in-memory exporter receives them, the
console's trace store fed from the same spans, the backend request's `_meta`, and the metrics.

The backend is the in-memory MCP server behind the real supervisor (tests/fakes/memory_connection.py),
so the request the backend receives is the one the real `ClientSession` sends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentify.backends import BackendManager
from agentify.backends.state import BackendState
from agentify.backends.supervisor import Supervisor
from agentify.config import PlannerConfig
from agentify.errors import NoPlan
from agentify.gateway.events import EventBus
from agentify.gateway.settings import PlannerSlot
from agentify.gateway.tasks import TaskRunner
from agentify.gateway.traces import TraceStore
from agentify.planner import Plan, PlanUsage
from agentify.planner.select import PlannerSelector
from agentify.security.redact import Redactor
from agentify.telemetry.export import VALUE_LIMIT
from agentify.telemetry.names import TASK_INPUT, TASK_KIND
from agentify.telemetry.setup import Telemetry, open_telemetry
from tests.fakes.memory_connection import MemoryConnection
from tests.unit.test_supervisor import spec, supervised

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789abcdefSECRET"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


class Chooses:
    """A planner that picks the memory backend's `echo` with arguments that quote a secret."""

    name = "scripted"

    def __init__(self, supervisor: Supervisor | None, refuse: bool = False) -> None:
        self._supervisor = supervisor
        self._refuse = refuse

    async def plan(self, task: Any, catalog: Any) -> Plan:
        if self._refuse or self._supervisor is None:
            raise NoPlan(f"no tool fits (the model said: not with {SECRET})")
        handle = {h.tool.name: h for h in self._supervisor.handles()}["echo"]
        usage = PlanUsage(provider="openai", model="gpt-test", prompt_tokens=120, completion_tokens=12, requests=1)
        return Plan(
            backend="mem",
            tool="echo",
            arguments={"text": f"say {SECRET}"},
            planner="openai",
            usage=usage,
            handle=handle,
        )


class Selector(PlannerSelector):
    def __init__(self, planner: Chooses) -> None:
        super().__init__(PlannerConfig(provider="offline"))
        self._planner = planner

    def choose(self, sampler: Any = None) -> Any:
        return self._planner


@dataclass
class Traced:
    runner: TaskRunner
    exported: InMemorySpanExporter
    metrics: InMemoryMetricReader
    store: TraceStore
    backend: MemoryConnection
    telemetry: Telemetry

    def spans(self) -> dict[str, ReadableSpan]:
        return {span.name: span for span in self.exported.get_finished_spans()}


@asynccontextmanager
async def traced(*, capture_content: bool = False, refuse: bool = False, read: bool = True) -> AsyncIterator[Traced]:
    """`read`: with an exporter, the metrics and the trace store attached; without, nothing reads the spans."""
    redactor = Redactor([SECRET])
    exported, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = open_telemetry(
        redactor,
        capture_content=capture_content,
        exporter=exported if read else None,
        metric_reader=metrics if read else None,
        environ={},
    )
    store = TraceStore(EventBus(), redactor)
    backend = MemoryConnection()
    manager = BackendManager([])
    async with supervised(spec(), backend) as (supervisor, states), anyio.create_task_group() as tg:
        await states.until(supervisor, BackendState.READY)
        await tg.start(manager.run)
        planners = PlannerSlot(Selector(Chooses(supervisor, refuse)))
        runner = TaskRunner(manager, planners, telemetry.tracer, redactor, 1000, 10_000, reading=telemetry.reading)
        with telemetry.attached(store) if read else nullcontext():
            yield Traced(runner, exported, metrics, store, backend, telemetry)
        manager.close()


async def test_a_task_is_one_trace_named_as_the_mcp_conventions_say_and_the_backend_gets_its_traceparent() -> None:
    async with traced() as t:
        outcome = await t.runner.run({"query": f"echo {SECRET}"})
    spans = t.spans()
    assert set(spans) == {"orchestrate", "validate", "plan", "tools/call echo"}
    task, call = spans["orchestrate"], spans["tools/call echo"]
    assert {format(s.context.trace_id, "032x") for s in spans.values()} == {outcome.trace_id}
    assert all(
        s.parent is not None and s.parent.span_id == task.context.span_id for s in spans.values() if s is not task
    )
    assert call.kind is SpanKind.CLIENT and call.status.status_code is StatusCode.UNSET
    assert dict(call.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",  # the backend's own name, not mem__echo
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
        "agentify.backend": "mem",
        "agentify.result.chars": 8,
        "agentify.result.cut": False,
    }  # no arguments, no result: otel.captureContent is off
    plan = dict(spans["plan"].attributes or {})
    assert plan["gen_ai.request.model"] == "gpt-test" and plan["gen_ai.usage.input_tokens"] == 120
    assert plan["gen_ai.usage.output_tokens"] == 12 and plan["agentify.planner"] == "scripted"
    assert "agentify.task.input" not in (task.attributes or {})
    # The backend continues the trace from the client span, as W3C trace context in the request's _meta.
    (meta,) = t.backend.metas
    assert meta["traceparent"].split("-")[1:3] == [outcome.trace_id, format(call.context.span_id, "016x")]


async def test_unread_spans_record_nothing_yet_keep_the_trace_id_until_a_reader_attaches() -> None:
    async with traced(read=False) as t:
        unread = await t.runner.run({"query": f"echo {SECRET}"})
        assert unread.trace_id is not None and len(unread.trace_id) == 32 and int(unread.trace_id, 16)
        # The backend still continues it, sampled as a recording gateway's root would be.
        assert t.backend.metas[0]["traceparent"].split("-")[1:4:2] == [unread.trace_id, "01"]
        assert not t.telemetry.reading()
        with t.telemetry.attached(t.store), t.telemetry.attached(t.store):  # the console and traceFile at once
            assert t.telemetry.reading()
            read = await t.runner.run({"query": "echo"})
            with t.telemetry.attached(t.store):
                pass
            after_one_left = await t.runner.run({"query": "echo"})
        gone = await t.runner.run({"query": "echo"})
    assert t.store.get(unread.trace_id) is None and t.store.get(gone.trace_id or "") is None
    for outcome in (read, after_one_left):
        trace = t.store.get(outcome.trace_id or "")
        assert trace is not None and [step.name for step in trace.spans] == ["validate", "plan", "tools/call echo"]
    assert t.store.counts()["total"] == 2  # attached twice, each task seen once


@pytest.mark.parametrize("flags", ["01", "00"])
async def test_unread_a_clients_trace_reaches_the_backend_sampled_as_the_client_said(flags: str) -> None:
    carrier = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-{flags}"}
    token = otel_context.attach(TraceContextTextMapPropagator().extract(carrier))
    try:
        async with traced(read=False) as t:
            outcome = await t.runner.run({"query": "echo"})
    finally:
        otel_context.detach(token)
    _, trace_id, parent, sent_flags = t.backend.metas[0]["traceparent"].split("-")
    assert outcome.trace_id == trace_id == CLIENT_TRACE and parent != CLIENT_SPAN and sent_flags == flags


def test_a_task_a_reader_saw_begin_ends_there_though_the_reader_left_meanwhile() -> None:
    telemetry = open_telemetry(Redactor(), environ={})
    store = TraceStore(EventBus(), Redactor())
    with telemetry.attached(store):  # the console serves, then stops while the task runs
        task = telemetry.tracer.start_span("call", attributes={TASK_KIND: "call", TASK_INPUT: "{}"})
    assert not telemetry.reading()
    task.end()
    trace = store.get(format(task.get_span_context().trace_id, "032x"))
    assert trace is not None and trace.status == "ok" and store.counts()["running"] == 0


async def test_the_console_and_trace_file_read_the_same_spans_with_their_content_redacted() -> None:
    async with traced() as t:
        outcome = await t.runner.run({"query": f"echo {SECRET}"})
    trace = t.store.get(outcome.trace_id or "")
    assert trace is not None and trace.status == "ok" and trace.kind == "orchestrate"
    assert trace.id == format(t.spans()["orchestrate"].context.span_id, "016x")
    assert trace.input == {"query": "echo [REDACTED]"}
    steps = {step.name: step for step in trace.spans}
    assert list(steps) == ["validate", "plan", "tools/call echo"]
    assert steps["plan"].attributes["gen_ai.tool.call.arguments"] == {"text": "say [REDACTED]"}
    assert steps["tools/call echo"].attributes["gen_ai.tool.call.result"] == "echo ran"
    assert SECRET not in json.dumps(trace.as_dict())


async def test_with_capture_content_arguments_and_results_are_exported_redacted() -> None:
    async with traced(capture_content=True) as t:
        await t.runner.run({"query": f"echo {SECRET}"})
    spans = t.spans()
    assert json.loads(str((spans["orchestrate"].attributes or {})["agentify.task.input"])) == {
        "query": "echo [REDACTED]"
    }
    call = spans["tools/call echo"].attributes or {}
    assert call["gen_ai.tool.call.arguments"] == '{"text": "say [REDACTED]"}'
    assert call["gen_ai.tool.call.result"] == "echo ran"


async def test_a_failed_task_exports_its_error_type_and_a_redacted_status() -> None:
    async with traced(refuse=True) as t:
        with pytest.raises(NoPlan) as info:
            await t.runner.run({"query": "delete the disk"})
    spans = t.spans()
    for name in ("orchestrate", "plan"):
        span = spans[name]
        assert (span.attributes or {})["error.type"] == "no_plan" and span.status.status_code is StatusCode.ERROR
        assert span.status.description == "no tool fits (the model said: not with [REDACTED])"
    assert "tools/call echo" not in spans
    trace = t.store.get(info.value.trace_id or "")
    assert trace is not None and trace.status == "error" and trace.error is not None
    assert trace.error["code"] == "no_plan" and SECRET not in trace.error["message"]


async def test_an_unsampled_client_trace_is_shown_in_the_console_but_not_exported() -> None:
    carrier = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"}
    token = otel_context.attach(TraceContextTextMapPropagator().extract(carrier))
    try:
        async with traced() as t:
            outcome = await t.runner.run({"query": "echo"})
    finally:
        otel_context.detach(token)
    assert outcome.trace_id == CLIENT_TRACE
    assert t.exported.get_finished_spans() == ()
    trace = t.store.get(CLIENT_TRACE)
    assert trace is not None and trace.status == "ok" and len(trace.spans) == 3
    assert t.backend.metas[0]["traceparent"].endswith("-00")  # passed on as the client decided: not sampled


async def test_backend_calls_are_measured_as_mcp_client_operation_durations() -> None:
    async with traced() as t:
        await t.runner.run({"query": "echo"})
        await t.runner.run({"query": "echo"})
    points = _histogram(t.metrics, "mcp.client.operation.duration")
    assert len(points) == 1 and points[0].count == 2 and points[0].sum > 0
    assert dict(points[0].attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
    }


def test_the_sdks_server_spans_are_measured_as_mcp_server_operation_durations() -> None:
    metrics = InMemoryMetricReader()
    telemetry = open_telemetry(Redactor(), transport="tcp", exporter=InMemorySpanExporter(), metric_reader=metrics)
    attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "orchestrate_task", "error.type": "tool_error"}
    sdk = telemetry.provider.get_tracer("mcp-python-sdk")
    with sdk.start_as_current_span("tools/call orchestrate_task", kind=SpanKind.SERVER, attributes=attributes):
        pass
    (point,) = _histogram(metrics, "mcp.server.operation.duration")
    assert dict(point.attributes or {}) == attributes | {"network.transport": "tcp"}


def test_every_exported_attribute_event_and_status_is_redacted_and_bounded() -> None:
    exported = InMemorySpanExporter()
    telemetry = open_telemetry(Redactor([SECRET]), exporter=exported)
    with telemetry.tracer.start_as_current_span(
        "step", attributes={"names": ["a", SECRET], "long": "x" * 10_000}
    ) as span:
        span.add_event("exception", {"exception.message": f"failed near {SECRET}"})
        span.set_status(StatusCode.ERROR, f"Bearer {SECRET}")
    (sent,) = exported.get_finished_spans()
    assert (sent.attributes or {})["names"] == ("a", "[REDACTED]")
    assert len(str((sent.attributes or {})["long"])) < VALUE_LIMIT + 100
    assert (sent.events[0].attributes or {})["exception.message"] == "failed near [REDACTED]"
    assert SECRET not in str(sent.status.description)


def test_the_resource_names_agentify_and_each_process_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = (open_telemetry(Redactor()).provider.resource.attributes for _ in range(2))
    assert first["service.name"] == "agentify" and first["service.instance.id"] != second["service.instance.id"]
    monkeypatch.setenv("OTEL_SERVICE_NAME", "team-gateway")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=pod-7,deployment.environment=prod")
    named = open_telemetry(Redactor()).provider.resource.attributes
    assert named["service.name"] == "team-gateway" and named["service.instance.id"] == "pod-7"


@pytest.mark.parametrize(
    ("environ", "exported"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, ("traces", "metrics")),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, ("traces",)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_METRICS_EXPORTER": "none"}, ("traces",)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}, ()),
    ],
)
def test_the_standard_variables_choose_what_is_exported(environ: dict[str, str], exported: tuple[str, ...]) -> None:
    telemetry = open_telemetry(Redactor(), environ=environ)
    try:
        assert telemetry.exported == exported
    finally:
        telemetry.shutdown()


async def test_with_the_sdk_disabled_tasks_run_untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    async with traced() as t:
        outcome = await t.runner.run({"query": "echo"})
    assert outcome.trace_id is None and outcome.result is not None
    assert t.exported.get_finished_spans() == () and t.store.recent() == []


def _histogram(reader: InMemoryMetricReader, name: str) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]
