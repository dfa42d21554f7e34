"""Fault injection: each fault gives the IDE a clear answer, and the next call works."""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import AGENTIFY, echo_works, error_code, fake_backend, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_backend_flooding_stderr_during_a_call_neither_blocks_nor_breaks(
    tmp_path: Path, model: ModelServer
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model, AGENTIFY_LOG_LEVEL="INFO"), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__flood_stderr", {"bytes": 10_000_000}))
        with anyio.fail_after(60):
            result = await session.call_tool("orchestrate_task", {"query": "flood"})
        assert text_of(result) == "flooded"
        await echo_works(session, model)
    assert (tmp_path / "stderr.log").stat().st_size < 1_000_000  # 10 MB of backend stderr did not flood the log


async def test_huge_result_is_cut_to_the_configured_limit_with_a_note(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()], maxResultChars=100_000)
    async with gateway(config, gateway_env(model, AGENTIFY_LOG_LEVEL="INFO"), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__big", {"bytes": 20_000_000}))
        with anyio.fail_after(60):
            result = await session.call_tool("orchestrate_task", {"query": "big"})
        assert not result.is_error
        assert result.content[0].text == "b" * 100_000  # type: ignore[union-attr]
        assert "19900000 characters of text were cut" in text_of(result) and "maxResultChars" in text_of(result)
        await echo_works(session, model)


async def test_malformed_json_on_backend_stdout_is_skipped(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__garbage_stdout", {}))
        result = await session.call_tool("orchestrate_task", {"query": "garbage"})
        assert text_of(result) == "wrote garbage"
        await echo_works(session, model)
    assert "unreadable message from the backend" in (tmp_path / "stderr.log").read_text()


async def test_model_slower_than_the_planner_timeout_is_planner_error(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()], planner={"timeoutSeconds": 1, "maxRetries": 0})
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply(body=Reply.text("late").body, delay=3))
        result = await session.call_tool("orchestrate_task", {"query": "echo"})
        assert error_code(result) == "planner_error" and "did not answer in time" in text_of(result)
        await echo_works(session, model)


def test_garbage_lines_on_the_gateway_stdin_are_answered_and_serving_goes_on(
    tmp_path: Path, model: ModelServer
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    model.push(Reply.tool_call("fake__echo", {"text": "after garbage"}))
    messages = [
        "this is not json",
        '{"jsonrpc": "2.0", "id": 99, "method": "no/such/method"}',
        "{]",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        ),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "\x00\x01 binary garbage",
        "[" * 200_000 + "]" * 200_000,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "orchestrate_task", "arguments": {"query": "echo after garbage"}},
            }
        ),
    ]
    process = subprocess.Popen(
        [str(AGENTIFY), "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=gateway_env(model) | {"PATH": "/usr/bin:/bin"},
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(("\n".join(messages) + "\n").encode())
        process.stdin.flush()
        by_id: dict[Any, dict[str, Any]] = {}
        replies: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while 2 not in by_id and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 1.0)
            if ready:
                line = process.stdout.readline()
                if not line:
                    break
                reply = json.loads(line)  # every stdout line is JSON-RPC
                by_id[reply.get("id")] = reply
                replies.append(reply)
    finally:
        process.stdin.close()
        process.wait(timeout=20)
        process.stdout.close()
    assert by_id[1]["result"]["serverInfo"]["name"] == "agentify"
    assert by_id[2]["result"]["content"][0]["text"] == "echo: after garbage"
    assert "error" in by_id[99]
    # Malformed, binary and 200,000-deep JSON each get a JSON-RPC parse error (null id): none is ignored.
    parse_errors = [reply for reply in replies if reply.get("id") is None and "error" in reply]
    assert len(parse_errors) == 4 and {r["error"]["code"] for r in parse_errors} == {-32700}
    assert any("Invalid JSON" in r["error"]["message"] for r in parse_errors)


async def test_500_tasks_at_concurrency_50_all_succeed_and_memory_stays_bounded(
    tmp_path: Path, model: ModelServer
) -> None:
    marker = tmp_path / "marker.log"
    model.router = lambda body: Reply.tool_call("fake__echo", {"text": "load"})
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker))])
    failures: list[str] = []
    async with gateway(config, gateway_env(model, AGENTIFY_LOG_LEVEL="WARNING"), tmp_path / "stderr.log") as session:
        await session.call_tool("orchestrate_task", {"query": "warm up"})
        gateway_pid = int(marker.read_text().split()[2])

        async def batch(count: int) -> None:
            limiter = anyio.Semaphore(50)

            async def one() -> None:
                async with limiter:
                    result = await session.call_tool("orchestrate_task", {"query": "echo load"})
                    if text_of(result) != "echo: load":
                        failures.append(text_of(result))

            async with anyio.create_task_group() as tg:
                for _ in range(count):
                    tg.start_soon(one)

        with anyio.fail_after(300):
            await batch(100)
            rss_after_100 = _rss_kib(gateway_pid)
            await batch(400)
            rss_after_500 = _rss_kib(gateway_pid)
    assert failures == []
    assert rss_after_500 < rss_after_100 * 1.5, (rss_after_100, rss_after_500)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
