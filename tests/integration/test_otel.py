"""OpenTelemetry through the real gateway: `agentify serve` with the standard `OTEL_*` variables exports
to an OTLP/HTTP receiver on 127.0.0.1 (tests/otlp_receiver.py decodes the protobuf requests), driven by
the official MCP client in both protocol eras, and over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import (
    AGENTIFY,
    API_KEY,
    ENV_SECRET,
    fake_backend,
    gateway,
    gateway_env,
    text_of,
    wait_until,
    write_config,
)
from tests.fakes.model_server import ModelServer, Reply
from tests.integration.ide_client import ERAS, MODES, ide_client
from tests.otlp_receiver import CLIENT, SERVER, OtlpReceiver, ReceivedSpan
from tests.servers import accepting, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
HTTP_TOKEN = "team-token-0123456789abcdef"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver().start()
    yield server
    server.stop()


def secret_backend() -> dict[str, object]:
    return fake_backend("fake", env={"FAKE_API_TOKEN": ENV_SECRET})


def tasks_by_trace(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    tasks: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        if "agentify.task.kind" in span.attributes:
            tasks.setdefault(span.trace_id, []).append(span)
    return tasks


@pytest.mark.parametrize("mode", MODES)
async def test_each_task_is_one_exported_trace_continued_from_the_clients_traceparent_and_passed_to_the_backend(
    mode: str, tmp_path: Path, model: ModelServer, receiver: OtlpReceiver
) -> None:
    config = write_config(tmp_path, [secret_backend()])
    env = gateway_env(model, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, AGENTIFY_CACHE_DIR=str(tmp_path / "c"))
    model.push(Reply.tool_call("fake__show_meta", {}), Reply.tool_call("fake__show_meta", {}))
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    async with ide_client(config, env, tmp_path / "e.log", mode) as client:
        continued = await client.call_tool(
            "orchestrate_task", {"query": "show me the meta"}, meta={"traceparent": traceparent}
        )
        fresh = await client.call_tool("orchestrate_task", {"query": "show me the meta again"})
    fresh_trace = (fresh.meta or {})["agentify/plan"]["traceId"]
    assert (continued.meta or {})["agentify/plan"]["traceId"] == CLIENT_TRACE and fresh_trace != CLIENT_TRACE
    # The gateway flushed its exporter as it left (stdin closed).
    await wait_until(lambda: set(tasks_by_trace(receiver.snapshot()[0])) == {CLIENT_TRACE, fresh_trace})
    spans, metrics = receiver.snapshot()
    assert all(len(tasks) == 1 for tasks in tasks_by_trace(spans).values())  # one trace per task
    by_id = {span.span_id: span for span in spans}

    trace = {span.name: span for span in spans if span.trace_id == CLIENT_TRACE}
    server = trace["tools/call orchestrate_task"]
    assert server.kind == SERVER and server.parent_id == CLIENT_SPAN and server.scope == "mcp-python-sdk"
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "orchestrate_task"
    assert server.attributes["network.transport"] == "pipe"
    assert server.attributes["mcp.protocol.version"] == ERAS[mode]
    task = trace["orchestrate"]
    assert task.parent_id == server.span_id
    assert trace["validate"].parent_id == task.span_id and trace["plan"].parent_id == task.span_id
    assert trace["plan"].attributes["gen_ai.usage.input_tokens"] == 120
    call = trace["tools/call show_meta"]
    assert call.kind == CLIENT and call.parent_id == task.span_id and call.scope == "agentify"
    assert {k: call.attributes.get(k) for k in ("gen_ai.tool.name", "gen_ai.operation.name", "network.transport")} == {
        "gen_ai.tool.name": "show_meta",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
    }
    for result, trace_id in ((continued, CLIENT_TRACE), (fresh, fresh_trace)):
        backend_meta = json.loads(text_of(result))
        assert "progressToken" not in backend_meta  # nobody would hear the backend's progress: it is not asked
        _, backend_trace, backend_parent, _ = backend_meta["traceparent"].split("-")
        assert backend_trace == trace_id
        ancestors = []
        while backend_parent in by_id:
            ancestors.append(by_id[backend_parent].name)
            backend_parent = by_id[backend_parent].parent_id
        assert "tools/call show_meta" in ancestors  # the backend continues under the gateway's call span

    assert {span.resource["service.name"] for span in spans} == {"agentify"}
    assert len({span.resource["service.instance.id"] for span in spans}) == 1
    served = metrics["mcp.server.operation.duration"]
    assert any(p["attributes"] and _attribute(p, "gen_ai.tool.name") == "orchestrate_task" for p in served)
    called = metrics["mcp.client.operation.duration"]
    counts = [int(p["count"]) for p in called if _attribute(p, "gen_ai.tool.name") == "show_meta"]
    assert counts[-1] == 2  # cumulative, as of the last export
    exported = "\n".join(receiver.raw)
    assert "show me the meta" not in exported  # no task input, arguments or results without captureContent
    for secret in (ENV_SECRET, API_KEY):
        assert secret not in exported


async def test_over_http_with_capture_content_the_exported_content_is_redacted(
    tmp_path: Path, model: ModelServer, receiver: OtlpReceiver
) -> None:
    port = free_port()
    config = write_config(tmp_path, [secret_backend()], otel={"captureContent": True})
    env = os.environ | gateway_env(
        model, AGENTIFY_HTTP_TOKEN=HTTP_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_SERVICE_NAME="team"
    )
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    model.push(Reply.tool_call("fake__echo", {"text": f"{ENV_SECRET} and {API_KEY}"}))
    async with await anyio.open_process(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        try:
            await wait_until(lambda: accepting(port), 30)
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {HTTP_TOKEN}"})
            async with client, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (r, w):
                async with ClientSession(r, w) as session:
                    with anyio.fail_after(30):
                        await session.initialize()
                        result = await session.call_tool("orchestrate_task", {"query": f"echo {ENV_SECRET}"})
            assert text_of(result) == "echo: [REDACTED] and [REDACTED]"
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    await wait_until(lambda: any(s.name == "tools/call echo" for s in receiver.snapshot()[0]))
    spans = {span.name: span for span in receiver.snapshot()[0]}
    assert spans["tools/call orchestrate_task"].attributes["network.transport"] == "tcp"
    assert spans["tools/call orchestrate_task"].resource["service.name"] == "team"
    assert json.loads(spans["orchestrate"].attributes["agentify.task.input"]) == {"query": "echo [REDACTED]"}
    call = spans["tools/call echo"].attributes
    assert json.loads(call["gen_ai.tool.call.arguments"]) == {"text": "[REDACTED] and [REDACTED]"}
    assert call["gen_ai.tool.call.result"] == "echo: [REDACTED] and [REDACTED]"
    exported = "\n".join(receiver.raw)
    for secret in (ENV_SECRET, API_KEY, HTTP_TOKEN):
        assert secret not in exported


async def test_tasks_and_the_trace_file_do_not_depend_on_the_collector_being_up(
    tmp_path: Path, model: ModelServer
) -> None:
    trace_file = tmp_path / "traces.jsonl"
    config = write_config(tmp_path, [fake_backend("fake")], traceFile=str(trace_file))
    env = gateway_env(model, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}")  # nobody listens
    model.push(Reply.tool_call("fake__echo", {"text": "no collector"}))
    async with gateway(config, env, tmp_path / "e.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "echo no collector"})
    assert text_of(result) == "echo: no collector"
    (trace,) = [json.loads(line) for line in trace_file.read_text().splitlines()]
    assert trace["status"] == "ok" and trace["traceId"] == (result.meta or {})["agentify/plan"]["traceId"]


def _attribute(point: dict[str, object], key: str) -> object:
    for pair in point.get("attributes") or []:  # type: ignore[attr-defined]
        if pair["key"] == key:
            return next(iter(pair["value"].values()))
    return None
