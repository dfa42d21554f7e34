"""orchestrate_task and plan_task through a real gateway process and the real filesystem server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import fs_backend, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def route_to_fs(body: dict[str, Any]) -> Reply:
    """A model that reads the file or lists the directory named in the task."""
    names = [tool["function"]["name"] for tool in body.get("tools", [])]
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    cwd = user.split("current working directory: ")[1].split("\n")[0]
    task = user.split("Task: ")[1].split("\n")[0]
    if task.startswith("read ") and "fs__read_text_file" in names:
        return Reply.tool_call("fs__read_text_file", {"path": f"{cwd}/{task.removeprefix('read ')}"})
    if task.startswith("list the files in ") and "fs__list_directory" in names:
        return Reply.tool_call("fs__list_directory", {"path": f"{cwd}/{task.removeprefix('list the files in ')}"})
    return Reply.text("None of the tools can do that.")


async def test_read_file_through_gateway_returns_backend_content_and_plan(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    model.router = route_to_fs
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool(
            "orchestrate_task",
            {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(workspace)}},
        )
    assert not result.is_error, text_of(result)
    assert text_of(result) == "remember the milk\n"
    plan = (result.meta or {})["agentify/plan"]
    assert plan["backend"] == "fs" and plan["tool"] == "read_text_file"
    assert plan["arguments"] == {"path": f"{workspace}/notes.txt"}
    assert plan["planner"] == "openai" and plan["traceId"] and plan["durationMs"] > 0


async def test_list_directory_and_cwd_from_context_reaches_the_model(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    model.router = route_to_fs
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool(
            "orchestrate_task",
            {"query": "list the files in docs", "context": {"currentWorkingDirectory": str(workspace)}},
        )
    assert not result.is_error, text_of(result)
    assert "[FILE] guide.md" in text_of(result) and "[FILE] faq.md" in text_of(result)
    assert f"current working directory: {workspace}" in model.user_messages()[0]
    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert {"fs__read_text_file", "fs__list_directory", "fs__write_file"} <= offered
    assert model.requests[0]["parallel_tool_calls"] is False
    read_schema = next(t for t in model.requests[0]["tools"] if t["function"]["name"] == "fs__read_text_file")
    assert "path" in read_schema["function"]["parameters"]["properties"]


async def test_plan_task_returns_the_plan_without_running_it(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    target = workspace / "created.txt"
    model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "x"}))
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("plan_task", {"query": "create created.txt"})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["tool"] == "write_file"
    assert not target.exists()


async def test_429_is_retried_honouring_retry_after(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    model.push(
        Reply.error(429, "slow down", headers={"Retry-After": "0"}),
        Reply.tool_call("fs__read_text_file", {"path": str(workspace / "notes.txt")}),
    )
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "read notes.txt"})
    assert not result.is_error, text_of(result)
    assert len(model.requests) == 2


async def test_invalid_arguments_get_one_repair_round_trip(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    model.push(
        Reply.tool_call("fs__read_text_file", {"file": "notes.txt"}),
        Reply.tool_call("fs__read_text_file", {"path": str(workspace / "notes.txt")}),
    )
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "read notes.txt"})
    assert not result.is_error, text_of(result)
    repair = model.requests[1]["messages"][-1]
    assert repair["role"] == "tool" and "'path' is a required property" in repair["content"]


async def test_thirty_concurrent_tasks_all_succeed(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    model.router = route_to_fs
    config = write_config(tmp_path, [fs_backend(workspace)])
    results: list[Any] = []
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:

        async def one(i: int) -> None:
            name = "notes.txt" if i % 2 else "docs/guide.md"
            task = {"query": f"read {name}", "context": {"currentWorkingDirectory": str(workspace)}}
            results.append(await session.call_tool("orchestrate_task", task))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(30):
                    tg.start_soon(one, i)
    assert len(results) == 30
    assert all(not r.is_error for r in results), [text_of(r) for r in results if r.is_error]
    assert sorted({text_of(r) for r in results}) == ["# Guide\n", "remember the milk\n"]


async def test_progress_reports_stages_and_relays_backend_progress(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    from tests.conftest import fake_backend

    model.push(Reply.tool_call("fake__slow", {"seconds": 0.3}))
    config = write_config(tmp_path, [fake_backend()])
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "wait a bit"}, progress_callback=on_progress)
    assert not result.is_error, text_of(result)
    assert messages[0] == "planning" and messages[1] == "calling fake.slow" and messages[-1] == "done"
    assert any(m.startswith("fake.slow: step 1") for m in messages)
