"""search_tools and call_tool: the IDE's own model chooses, with agentify's checks around the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_code, fake_backend, fs_backend, gateway, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, answering, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def traces(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_search_then_call_reads_a_file_without_any_planner_key(tmp_path: Path, workspace: Path) -> None:
    trace_file = tmp_path / "traces.jsonl"
    config = write_config(tmp_path, [fs_backend(workspace)], traceFile=str(trace_file))
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        found = await session.call_tool("search_tools", {"query": "read the text of a file", "limit": 3})
        tools = (found.structured_content or {})["tools"]
        called = await session.call_tool(
            "call_tool",
            {"name": tools[0]["name"], "arguments": {"path": str(workspace / "notes.txt")}},
            progress_callback=on_progress,
        )
    assert len(tools) == 3 and tools[0]["name"] == "fs__read_text_file", [t["name"] for t in tools]
    first = tools[0]
    assert first["backend"] == "fs" and first["tool"] == "read_text_file"
    assert first["inputSchema"]["required"] == ["path"] and first["annotations"]["readOnlyHint"] is True
    assert "fs__read_text_file" in text_of(found) and '"inputSchema"' in text_of(found)
    assert not called.is_error and text_of(called) == "remember the milk\n"
    plan = (called.meta or {})["agentify/plan"]
    assert plan["planner"] == "ide" and plan["tool"] == "read_text_file" and plan["traceId"]
    assert progress == ["calling fs.read_text_file", "done"]
    recorded = {t["kind"]: t for t in traces(trace_file)}
    assert recorded["search"]["status"] == "ok" and recorded["call"]["status"] == "ok"
    assert recorded["call"]["traceId"] == plan["traceId"]
    assert [s["name"] for s in recorded["call"]["spans"]] == ["validate", "tools/call read_text_file"]


async def test_call_tool_refuses_bad_arguments_and_unknown_names_saying_what_to_do(
    tmp_path: Path, workspace: Path
) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        bad = await session.call_tool("call_tool", {"name": "fs__read_text_file", "arguments": {"file": "x"}})
        unknown = await session.call_tool("call_tool", {"name": "fs__read_txt_file", "arguments": {}})
        missing = await session.call_tool("call_tool", {"arguments": {}})
        extra = await session.call_tool("call_tool", {"name": "fs__list_directory", "arguments": {}, "why": "x"})
        still = await session.call_tool("call_tool", {"name": "fs__list_directory", "arguments": {"path": "/etc"}})
    assert error_code(bad) == "invalid_input" and "'path' is a required property" in text_of(bad)
    assert error_code(unknown) == "invalid_input" and "Did you mean fs__read_text_file" in text_of(unknown)
    assert error_code(missing) == "invalid_input" and "name" in text_of(missing)
    assert error_code(extra) == "invalid_input" and "why" in text_of(extra)
    # A backend's own error is its result, unchanged, not one of the gateway's.
    assert still.is_error and "Access denied" in text_of(still) and error_code(still) is None


async def test_call_tool_applies_the_safety_policy(tmp_path: Path, workspace: Path) -> None:
    target = workspace / "out.txt"
    call = {"name": "fs__write_file", "arguments": {"path": str(target), "content": "x"}}
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(None), tmp_path / "e.log", elicitation_callback=answering("decline")) as s:
        declined = await s.call_tool("call_tool", call)
    async with gateway(config, gateway_env(None), tmp_path / "e.log", elicitation_callback=answering("accept")) as s:
        accepted = await s.call_tool("call_tool", call)
    assert error_code(declined) == "denied" and "declined" in text_of(declined)
    assert not accepted.is_error and target.read_text() == "x"


async def test_expose_search_only_offers_search_and_call(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)], expose=["search"])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        listed = await session.list_tools()
        refused = await session.call_tool("orchestrate_task", {"query": "read notes.txt"})
    assert [t.name for t in listed.tools] == ["search_tools", "call_tool"]
    assert error_code(refused) == "invalid_input" and "search_tools, call_tool" in text_of(refused)


def _type_arrays(node: Any) -> list[Any]:
    if isinstance(node, dict):
        found = [node["type"]] if isinstance(node.get("type"), list) else []
        return found + [t for value in node.values() for t in _type_arrays(value)]
    if isinstance(node, list):
        return [t for value in node for t in _type_arrays(value)]
    return []


async def test_gateway_schemas_have_no_type_arrays_and_extra_keys_are_refused_as_they_say(
    tmp_path: Path, workspace: Path
) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)])
    examples = {
        "orchestrate_task": {"query": "read notes.txt"},
        "plan_task": {"query": "read notes.txt"},
        "list_backends": {},
        "search_tools": {"query": "read"},
        "call_tool": {"name": "fs__list_allowed_directories"},
    }
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        listed = await session.list_tools()
        refused = {name: await session.call_tool(name, {**args, "unexpected": 1}) for name, args in examples.items()}
        context_extra = await session.call_tool(
            "plan_task",
            {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(workspace), "editor": "vim"}},
        )
    schemas = {t.name: t.input_schema for t in listed.tools}
    assert set(schemas) == set(examples)
    for name, schema in schemas.items():
        assert _type_arrays(schema) == [], name
        assert schema["additionalProperties"] is False, name
        assert error_code(refused[name]) == "invalid_input" and "unexpected" in text_of(refused[name]), name
    # The context says nothing about extra keys, and the handler ignores them.
    assert "additionalProperties" not in schemas["plan_task"]["properties"]["context"]
    assert not context_extra.is_error, text_of(context_extra)


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_asks_for_progress_hears_the_steps_and_the_backends_own_in_either_era(
    mode: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    heard: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    call = {"name": "fake__progress", "arguments": {"count": 3, "message": "step"}}
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode) as client:
        result = await client.call_tool("call_tool", call, progress_callback=on_progress)
    assert text_of(result) == "reported 3"
    assert heard[0] == "calling fake.progress" and heard[-1] == "done"
    assert heard[-2] == "fake.progress: step (3/3)"  # the backend was asked, and its latest report came last


@pytest.mark.parametrize("mode", MODES)
async def test_listed_tools_are_listed_beside_the_search_tools_and_run_by_name_in_either_era(
    mode: str, tmp_path: Path, workspace: Path
) -> None:
    named = ["fs__read_text_file", "fs__no_such_tool"]
    config = write_config(tmp_path, [fs_backend(workspace)], expose=["search"], listedTools=named)
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode) as client:
        tools = (await client.list_tools()).tools
        result = await client.call_tool("fs__read_text_file", {"path": str(workspace / "notes.txt")})
        unknown = await client.call_tool("fs__write_file", {"path": str(workspace / "x"), "content": "x"})
    assert [t.name for t in tools] == ["search_tools", "call_tool", "fs__read_text_file"]
    assert tools[2].input_schema["required"] == ["path"]
    assert not result.is_error and text_of(result) == "remember the milk\n"
    assert error_code(unknown) == "invalid_input" and not (workspace / "x").exists()  # only the named ones are listed
    description = tools[0].description or ""
    assert "- fs: workspace files (14 tools: " in description and "read_text_file" in description


async def test_search_tools_finds_every_tool_a_query_needs(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace), fake_backend()])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        query = "create a new directory called logs and then echo the text hello"
        found = await session.call_tool("search_tools", {"query": query, "limit": 4})
    names = [t["name"] for t in (found.structured_content or {})["tools"]]
    assert "fs__create_directory" in names and "fake__echo" in names, names
