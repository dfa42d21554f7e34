"""The sampling planner reading the IDE model's answers: fenced JSON, and answers too long to read."""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types
import pytest

from agentify.errors import NoPlan, PlannerError
from agentify.planner.sampling import MAX_REPLY_CHARS, SamplingPlanner
from tests.planner.support import catalog_of, task, tool

pytestmark = pytest.mark.anyio


class ScriptedModel:
    """The IDE's model, answering each sampling request with the next text (no tool support)."""

    supports_tools = False

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)

    async def create(self, messages: Any, *, system_prompt: str, tools: Any) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text=self.answers.pop(0))
        return types.CreateMessageResult(role="assistant", content=text, model="ide")


CATALOG = catalog_of(tool("read", "Read a file", {"path": {"type": "string"}}, "path"), backend="fs")


async def plan_from(*answers: str) -> Any:
    return await SamplingPlanner(ScriptedModel(*answers), timeout_seconds=10).plan(task("read a.txt"), CATALOG)


async def test_a_fenced_json_answer_is_read() -> None:
    plan = await plan_from('```json\n{"tool": "fs__read", "arguments": {"path": "a.txt"}}\n```')
    assert (plan.tool, plan.arguments) == ("read", {"path": "a.txt"})
    plan = await plan_from('Here it is:\n```\n{"tool": "fs__read", "arguments": {"path": "b.txt"}}\n```\nDone.')
    assert plan.arguments == {"path": "b.txt"}


async def test_a_fence_full_of_whitespace_is_read_in_linear_time() -> None:
    """The old fence pattern backtracked over whitespace: 96 kB of it froze the gateway for 13 s."""
    started = time.process_time()
    with pytest.raises(NoPlan):
        await plan_from("{" + " " * 50_000 + "x")
    assert time.process_time() - started < 1  # CPU seconds: a loaded machine does not count


async def test_an_answer_longer_than_the_limit_is_refused_unread() -> None:
    with pytest.raises(PlannerError) as refused:
        await plan_from('{"tool": "fs__read", "arguments": {"path": "' + "a" * MAX_REPLY_CHARS + '"}}')
    assert "characters" in refused.value.message and str(MAX_REPLY_CHARS) in refused.value.message
