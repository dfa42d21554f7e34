"""Lazy backends: planned from the tool manifest, started by the first call, stopped after their idle time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    echo_works,
    error_code,
    fake_backend,
    fs_backend,
    gateway,
    gateway_env,
    pid_alive,
    text_of,
    wait_until,
    write_config,
)
from tests.fakes.model_server import ModelServer, Reply
from tests.integration.ide_client import MODES, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def started_pids(marker: Path) -> list[int]:
    if not marker.exists():
        return []
    return [int(line.split()[1]) for line in marker.read_text().splitlines() if line.startswith("started ")]


async def listed(session: Any, backend_id: str) -> dict[str, Any]:
    listing = await session.call_tool("list_backends", {})
    return next(b for b in (listing.structured_content or {})["backends"] if b["id"] == backend_id)


async def test_lazy_backend_is_learnt_once_then_runs_only_while_it_is_used(tmp_path: Path, model: ModelServer) -> None:
    marker = tmp_path / "lazy.log"
    lazy = fake_backend("lazy", "--marker", str(marker), start="lazy", idleStopSeconds=1)
    config = write_config(tmp_path, [lazy, fake_backend()])
    env = gateway_env(model)

    # First run, no manifest yet: the backend is started once to learn its tools, then stopped.
    async with gateway(config, env, tmp_path / "stderr.log") as session:
        await echo_works(session, model)  # planning waits for the learning start
        await wait_until(lambda: len(started_pids(marker)) == 1)
        learnt = started_pids(marker)[0]
        await wait_until(lambda: not pid_alive(learnt))
        state = await listed(session, "lazy")
        assert state["state"] == "idle" and "echo" in state["tools"] and state["start"] == "lazy"
    assert any(t["function"]["name"] == "lazy__echo" for t in model.requests[0]["tools"])

    # Second run, with the manifest: nothing runs until a plan needs the backend.
    async with gateway(config, env, tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        state = await listed(session, "lazy")
        assert state["state"] == "idle" and "echo" in state["tools"] and state["pid"] is None
        assert len(started_pids(marker)) == 1  # not started: planned from the manifest
        assert any(t["function"]["name"] == "lazy__echo" for t in model.requests[-1]["tools"])

        model.push(Reply.tool_call("lazy__echo", {"text": "wake up"}))
        result = await session.call_tool("orchestrate_task", {"query": "echo wake up on lazy"})
        assert text_of(result) == "echo: wake up", text_of(result)
        pid = started_pids(marker)[-1]
        assert len(started_pids(marker)) == 2 and pid_alive(pid)
        assert (await listed(session, "lazy"))["pid"] == pid

        await wait_until(lambda: not pid_alive(pid))  # idleStopSeconds: 1
        state = await listed(session, "lazy")
        assert state["state"] == "idle" and state["restarts"] == 0 and "echo" in state["tools"]

        model.push(Reply.tool_call("lazy__echo", {"text": "again"}))
        again = await session.call_tool("orchestrate_task", {"query": "echo again on lazy"})
        assert text_of(again) == "echo: again" and len(started_pids(marker)) == 3


async def test_a_changed_command_is_learnt_afresh(tmp_path: Path, model: ModelServer) -> None:
    marker = tmp_path / "lazy.log"
    first = write_config(tmp_path, [fake_backend("lazy", "--marker", str(marker), start="lazy"), fake_backend()])
    async with gateway(first, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        await wait_until(lambda: len(started_pids(marker)) == 1)
    changed = fake_backend("lazy", "--marker", str(marker), "--spawn-child", start="lazy")
    second = write_config(tmp_path, [changed, fake_backend()])
    async with gateway(second, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        await wait_until(lambda: len(started_pids(marker)) == 2)


@pytest.mark.parametrize("first", ["planned", "called"])
async def test_the_first_call_to_a_lazy_backend_being_learnt_is_not_cut_off(
    tmp_path: Path, model: ModelServer, first: str
) -> None:
    """No manifest yet: the start that learns the tools must not stop the backend under a call in flight,
    whether the call comes through the planner or straight through call_tool; and the work is done once."""
    marker = tmp_path / "lazy.log"
    config = write_config(tmp_path, [fake_backend("lazy", "--marker", str(marker), start="lazy")])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        if first == "planned":
            model.push(Reply.tool_call("lazy__slow", {"seconds": 1}))
            result = await session.call_tool("orchestrate_task", {"query": "wait a second on lazy"})
        else:
            result = await session.call_tool("call_tool", {"name": "lazy__slow", "arguments": {"seconds": 1}})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "slept 1.0"
    assert [line for line in marker.read_text().splitlines() if line.startswith("slow")] == ["slow 1"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_manifest_edited_to_make_a_destructive_tool_read_only_does_not_skip_the_confirmation(
    tmp_path: Path, workspace: Path, model: ModelServer, mode: str
) -> None:
    """The manifest plans; whether the call needs the user's confirmation is the running backend's word."""
    config = write_config(tmp_path, [fs_backend(workspace, start="lazy")])
    env = gateway_env(model, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    manifests = tmp_path / "cache" / "manifests"
    async with gateway(config, env, tmp_path / "stderr.log"):
        await wait_until(lambda: any(manifests.glob("*.json")))  # learnt once
    (manifest,) = manifests.glob("*.json")
    data = json.loads(manifest.read_text())
    (write_file,) = [tool for tool in data["tools"] if tool["name"] == "write_file"]
    write_file["annotations"] = {"readOnlyHint": True, "destructiveHint": False}
    manifest.write_text(json.dumps(data))

    target = workspace / "out.txt"
    async with ide_client(config, env, tmp_path / "stderr.log", mode) as client:  # it cannot ask the user
        model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "overwritten"}))
        result = await client.call_tool("orchestrate_task", {"query": "write out.txt"})
    assert error_code(result) == "denied", text_of(result)
    assert "marked destructive by its server" in text_of(result)
    assert not target.exists()


async def test_a_lazy_backends_tools_are_found_by_meaning_from_its_manifest_before_it_starts(
    tmp_path: Path, workspace: Path
) -> None:
    marker = tmp_path / "lazy.log"
    config = write_config(
        tmp_path, [fake_backend("lazy", "--marker", str(marker), start="lazy"), fs_backend(workspace)]
    )
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    async with gateway(config, env, tmp_path / "stderr.log"):
        await wait_until(lambda: any((tmp_path / "cache" / "manifests").glob("*.json")))  # learnt once
        await wait_until(lambda: bool(started_pids(marker)) and not pid_alive(started_pids(marker)[0]))
    async with gateway(config, env, tmp_path / "stderr.log") as session:
        found = await session.call_tool("search_tools", {"query": "give me back what I wrote", "limit": 3})
        state = await listed(session, "lazy")
    names = [t["name"] for t in (found.structured_content or {})["tools"]]
    assert names[0] == "lazy__echo", names  # "Echo the text back": by meaning, one word in common
    assert state["pid"] is None and len(started_pids(marker)) == 1  # searched without starting it
