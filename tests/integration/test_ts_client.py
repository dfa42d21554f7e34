"""The TypeScript v2 client (@modelcontextprotocol/client, as IDEs on it run) confirming calls.

It negotiates 2026-07-28 with this gateway ("auto"), where a confirmation is an
`InputRequiredResult` round trip; "legacy" pins it to 2025-11-25 for comparison.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, REPO, fake_backend, fs_backend, gateway_env, write_config
from tests.integration.ide_client import ts_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
ASKING = REPO / "tests/fakes/asking_backend.py"


async def drive(
    tmp_path: Path,
    mode: str,
    elicitation: str | None,
    calls: list[dict[str, Any]],
    backends: list[dict[str, Any]] | None = None,
    content: dict[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """`backends`: instead of the filesystem server; `content`: what an accepted form holds; `top`: more
    top-level config keys."""
    config = write_config(tmp_path, backends or [fs_backend(tmp_path / "workspace")], **top)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")} | gateway_env(None)
    spec = {
        "command": str(AGENTIFY),
        "args": ["serve", "--config", str(config)],
        "env": env,
        "stderrFile": str(tmp_path / "e.log"),
        "mode": mode,
        "elicitation": elicitation,
        "calls": calls,
        "content": content,
    }
    return await ts_client(spec)


def write_call(target: Path) -> dict[str, Any]:
    return {
        "name": "call_tool",
        "arguments": {"name": "fs__write_file", "arguments": {"path": str(target), "content": "ts"}},
    }


def text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


def code(result: dict[str, Any]) -> str | None:
    return ((result.get("_meta") or {}).get("agentify/error") or {}).get("code")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_ts_client_accepts_and_the_call_runs(tmp_path: Path, workspace: Path, mode: str) -> None:
    target = workspace / "out.txt"
    answer = await drive(tmp_path, mode, "accept", [write_call(target)])
    [result] = answer["results"]
    assert not result.get("isError"), text(result)
    assert target.read_text() == "ts"
    [asked] = answer["asked"]
    assert "write_file" in asked["message"] and asked["schema"]["properties"] == {}


@pytest.mark.parametrize(("elicitation", "word"), [("decline", "declined"), ("cancel", "dismissed")])
async def test_ts_client_declines_or_dismisses_and_nothing_runs(
    tmp_path: Path, workspace: Path, elicitation: str, word: str
) -> None:
    target = workspace / "out.txt"
    answer = await drive(tmp_path, "auto", elicitation, [write_call(target)])
    [result] = answer["results"]
    assert code(result) == "denied" and word in text(result)
    assert not target.exists()


async def test_ts_client_without_elicitation_is_told_how_to_allow(tmp_path: Path, workspace: Path) -> None:
    target = workspace / "out.txt"
    read = {
        "name": "call_tool",
        "arguments": {"name": "fs__read_text_file", "arguments": {"path": str(workspace / "notes.txt")}},
    }
    answer = await drive(tmp_path, "auto", None, [write_call(target), read])
    denied, still = answer["results"]
    assert code(denied) == "denied" and "allowDestructive: true" in text(denied)
    assert not target.exists()
    assert text(still) == "remember the milk\n"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_ts_client_answers_a_backends_own_question(tmp_path: Path, era: str) -> None:
    """The backend asks by request (2025-11-25 backend) or with an InputRequiredResult (2026-07-28 one);
    the TypeScript client answers in its 2026-07-28 rounds."""
    backend = {"id": "ask", "command": sys.executable, "args": [str(ASKING), "--era", era]}
    confirm = {"name": "call_tool", "arguments": {"name": "ask__confirm", "arguments": {"path": "old.txt"}}}
    answer = await drive(tmp_path, "auto", "accept", [confirm], backends=[backend])
    [result] = answer["results"]
    assert text(result) == "deleted old.txt", result
    [asked] = answer["asked"]
    assert asked["message"] == "From backend ask (not agentify): Delete old.txt?"


async def test_ts_client_confirms_a_backend_tool_shown_directly(tmp_path: Path, workspace: Path) -> None:
    target = workspace / "out.txt"
    call = {"name": "fs__write_file", "arguments": {"path": str(target), "content": "ts"}}
    answer = await drive(tmp_path, "auto", "accept", [call], expose=["tools"])
    [result] = answer["results"]
    assert not result.get("isError"), text(result)
    assert target.read_text() == "ts" and len(answer["asked"]) == 1


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_ts_client_fills_in_the_arguments_a_task_does_not_say(tmp_path: Path, mode: str) -> None:
    task = {"name": "orchestrate_task", "arguments": {"query": "what's the weather forecast?"}}
    backend = fake_backend("fake", "--forecast")
    filled = {"city": "Paris", "units": "celsius"}
    answer = await drive(tmp_path, mode, "accept", [task], [backend], filled, planner={"provider": "offline"})
    [result] = answer["results"]
    assert text(result) == "forecast for Paris in celsius for 1 days: sunny", result
    [asked] = answer["asked"]
    assert asked["message"].startswith("agentify chose fake.forecast for this task; it needs: city, units")
    assert asked["schema"]["properties"]["units"]["enum"] == ["celsius", "fahrenheit"]
