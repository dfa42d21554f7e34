"""The sampling planner: with no API key, the IDE's own model plans through sampling/createMessage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.conftest import error_code, fs_backend, gateway, gateway_env, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def ide_model(answers: list[Any], seen: list[types.CreateMessageRequestParams]) -> Any:
    """A sampling callback that answers with the given blocks in turn, recording each request."""

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.append(params)
        answer = answers.pop(0)
        if isinstance(answer, types.ToolUseContent):
            return types.CreateMessageResultWithTools(
                role="assistant", content=[answer], model="ide-model", stop_reason="toolUse"
            )
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=answer), model="ide-model"
        )

    return sample


async def test_ide_model_with_tool_support_plans_the_call(tmp_path: Path, workspace: Path) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    use = types.ToolUseContent(type="tool_use", id="t1", name="fs__read_text_file", input={"path": "notes.txt"})
    fixed = types.ToolUseContent(
        type="tool_use", id="t2", name="fs__read_text_file", input={"path": str(workspace / "notes.txt")}
    )
    bad = types.ToolUseContent(type="tool_use", id="t0", name="fs__read_text_file", input={"file": "x"})
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(
        config,
        gateway_env(None),
        tmp_path / "e.log",
        sampling_callback=ide_model([bad, fixed, use], seen),
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()),
    ) as session:
        result = await session.call_tool(
            "orchestrate_task", {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(workspace)}}
        )
        listing = await session.call_tool("list_backends", {})
    assert text_of(result) == "remember the milk\n", text_of(result)
    assert (result.meta or {})["agentify/plan"]["planner"] == "sampling"
    assert seen[0].tools is not None and "fs__read_text_file" in {t.name for t in seen[0].tools}
    assert f"current working directory: {workspace}" in json.dumps(seen[0].model_dump(mode="json"))
    repair = seen[1].messages[-1].content
    assert "'path' is a required property" in json.dumps(repair if isinstance(repair, list) else [repair], default=str)
    assert "planner: sampling (the IDE's model)" in text_of(listing)


async def test_ide_model_without_tool_support_answers_with_a_json_plan(tmp_path: Path, workspace: Path) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    plan = json.dumps({"tool": "fs__list_directory", "arguments": {"path": str(workspace / "docs")}})
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(
        config, gateway_env(None), tmp_path / "e.log", sampling_callback=ide_model([f"```json\n{plan}\n```"], seen)
    ) as session:
        result = await session.call_tool("orchestrate_task", {"query": "list the files in docs"})
    assert "[FILE] guide.md" in text_of(result), text_of(result)
    assert seen[0].tools is None and "fs__list_directory" in (seen[0].system_prompt or "")


async def test_ide_model_finding_no_tool_is_no_plan_with_its_words(tmp_path: Path, workspace: Path) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    answer = json.dumps({"tool": None, "reason": "There is no calendar tool."})
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with gateway(config, gateway_env(None), tmp_path / "e.log", sampling_callback=ide_model([answer], seen)) as s:
        result = await s.call_tool("orchestrate_task", {"query": "book a meeting"})
    assert error_code(result) == "no_plan" and "There is no calendar tool." in text_of(result)
