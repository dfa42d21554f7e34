"""tools.overrides: a backend tool renamed, described anew and with fixed arguments, as the IDE sees it and
as the backend receives it (the real filesystem server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_code, fs_backend, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def notes_override(workspace: Path) -> dict[str, Any]:
    return {
        "overrides": {
            "read_text_file": {
                "name": "read_notes",
                "description": "The team's notes: what to remember today.",
                "arguments": {"path": str(workspace / "notes.txt")},
            }
        }
    }


async def test_an_overridden_tool_is_shown_renamed_without_its_fixed_arguments_and_called_with_them(
    tmp_path: Path, workspace: Path
) -> None:
    (tmp_path / "other.txt").write_text("not for the IDE\n")
    config = write_config(tmp_path, [fs_backend(workspace, tools=notes_override(workspace))])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        found = await session.call_tool("search_tools", {"query": "what to remember today notes", "limit": 50})
        called = await session.call_tool("call_tool", {"name": "fs__read_notes", "arguments": {}})
        head = await session.call_tool("call_tool", {"name": "fs__read_notes", "arguments": {"head": 1}})
        forced = await session.call_tool(
            "call_tool", {"name": "fs__read_notes", "arguments": {"path": str(tmp_path / "other.txt")}}
        )
        old_name = await session.call_tool("call_tool", {"name": "fs__read_text_file", "arguments": {}})
        backends = await session.call_tool("list_backends", {})
    tools = {t["name"]: t for t in (found.structured_content or {})["tools"]}
    shown = tools["fs__read_notes"]
    assert shown["tool"] == "read_notes" and shown["description"].endswith("The team's notes: what to remember today.")
    assert "path" not in shown["inputSchema"]["properties"] and "path" not in shown["inputSchema"].get("required", [])
    assert "head" in shown["inputSchema"]["properties"]  # the other arguments stay
    assert "fs__read_text_file" not in tools
    assert not called.is_error and text_of(called) == "remember the milk\n"
    assert (called.meta or {})["agentify/plan"]["tool"] == "read_notes"
    assert (called.meta or {})["agentify/plan"]["arguments"] == {}  # the fixed value is not shown
    assert not head.is_error and text_of(head).strip() == "remember the milk"
    assert error_code(forced) == "invalid_input" and "path: fixed by tools.overrides" in text_of(forced)
    assert "not for the IDE" not in text_of(forced)
    assert error_code(old_name) == "invalid_input" and "is offered as fs__read_notes" in text_of(old_name)
    listed = (backends.structured_content or {})["backends"][0]["tools"]
    assert "read_notes" in listed and "read_text_file" not in listed


async def test_an_override_naming_no_tool_is_a_warning_and_the_backend_still_serves(
    tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "e.log"
    tools = {"overrides": {"read_txt_file": {"description": "typo"}, "list_directory": {"name": "read_text_file"}}}
    config = write_config(tmp_path, [fs_backend(workspace, tools=tools)])
    async with gateway(config, gateway_env(None), log) as session:
        listed = await session.call_tool("call_tool", {"name": "fs__list_directory", "arguments": {"path": "."}})
        backends = await session.call_tool("list_backends", {})
    names = (backends.structured_content or {})["backends"][0]["tools"]
    assert "read_text_file" in names and "list_directory" in names  # the clashing rename was not applied
    assert not listed.is_error and "notes.txt" in text_of(listed)
    text = log.read_text()
    assert "tools.overrides names 'read_txt_file', which the backend does not offer" in text
    assert "renames 'list_directory' to 'read_text_file'" in text


async def test_the_planner_sees_the_overridden_form_and_its_plan_runs_with_the_fixed_arguments(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    model.push(Reply.tool_call("fs__read_notes", {}))
    config = write_config(tmp_path, [fs_backend(workspace, tools=notes_override(workspace))])
    async with gateway(config, gateway_env(model), tmp_path / "e.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "what must I remember today?"})
    assert not result.is_error and text_of(result) == "remember the milk\n"
    offered = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
    assert "fs__read_text_file" not in offered
    notes = offered["fs__read_notes"]
    assert "The team's notes" in notes["description"] and "path" not in notes["parameters"]["properties"]
    assert str(workspace) not in str(model.requests)  # the fixed path never reaches the model
