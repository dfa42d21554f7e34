"""The sampling planner: the same planning request, answered by the IDE's own model.

Goes through MCP `sampling/createMessage` on the request that carries the task. Where the
client declares tool support in sampling, the catalog is offered as tools and the model
answers with a tool use; otherwise the model is asked for a JSON plan. Either way the plan
is validated against the tool's schema, with one repair round trip, like the OpenAI planner.

Raises: NoPlan, InvalidPlan, PlannerError.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from agentify.errors import InvalidPlan, NoPlan, PlannerError
from agentify.planner import Plan, PlanUsage, TaskInput
from agentify.planner.catalog import Catalog, CatalogTool
from agentify.planner.prompt import SYSTEM_PROMPT, user_message

MAX_TOKENS = 1024
MAX_REPLY_CHARS = 64_000
"""An answer to a request for at most MAX_TOKENS tokens is a few thousand characters; past this it is not read."""
_JSON_INSTRUCTIONS = """Answer with one JSON object and nothing else:
{"tool": "<one of the tool names below>", "arguments": {...}}  when a tool fits, or
{"tool": null, "reason": "<why none fits>"}  when none does.
Tools (name, description, JSON schema of the arguments):
"""

SamplingResult = types.CreateMessageResult | types.CreateMessageResultWithTools


class Sampler(Protocol):
    """Sends one `sampling/createMessage` to the client of the current request."""

    supports_tools: bool

    async def create(
        self, messages: list[types.SamplingMessage], *, system_prompt: str, tools: list[types.Tool] | None
    ) -> SamplingResult: ...


class SamplingPlanner:
    name = "sampling"

    def __init__(self, sampler: Sampler, timeout_seconds: float) -> None:
        self._sampler = sampler
        self._timeout = timeout_seconds

    async def plan(self, task: TaskInput, catalog: Catalog, offered: Sequence[CatalogTool] | None = None) -> Plan:
        tools = list(offered if offered is not None else catalog.tools.values())
        if not tools:
            raise NoPlan("no backend tools are available to plan with: check `list_backends` for failed backends")
        use_tools = self._sampler.supports_tools
        system = SYSTEM_PROMPT if use_tools else SYSTEM_PROMPT + "\n\n" + _JSON_INSTRUCTIONS + _tool_list(tools)
        mcp_tools = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in tools]
        messages = [_text_message("user", user_message(task))]
        requests = 0
        for attempt in range(2):
            result = await self._create(messages, system, mcp_tools if use_tools else None)
            requests += 1
            _check_size(result)
            name, arguments, said, tool_use = _read_answer(result, use_tools)
            if name is None:
                raise NoPlan(f"the planner found no tool for this task. It said: {said or '(no reason given)'}")
            tool = catalog.get(name)
            if tool is None:
                raise InvalidPlan(f"the IDE's model chose {name!r}, which is not one of the offered tools")
            problem = tool.validation_error(arguments)
            if problem is None:
                usage = PlanUsage(provider="sampling", model=result.model, requests=requests, tools_offered=len(tools))
                assert isinstance(arguments, dict)
                return Plan(
                    backend=tool.backend,
                    handle=tool.handle,
                    tool=tool.tool.name,
                    arguments=arguments,
                    planner=self.name,
                    reasoning=said,
                    usage=usage,
                )
            if attempt == 1:
                raise InvalidPlan(
                    f"the IDE model's arguments for {tool.backend}.{tool.tool.name} still fail its input schema "
                    f"after one repair: {problem}. Rephrase the task with the missing details."
                )
            messages += _repair_messages(result, tool_use, problem)
        raise AssertionError("unreachable")

    async def _create(
        self, messages: list[types.SamplingMessage], system: str, tools: list[types.Tool] | None
    ) -> SamplingResult:
        try:
            with anyio.fail_after(self._timeout):
                return await self._sampler.create(messages, system_prompt=system, tools=tools)
        except TimeoutError:
            raise PlannerError(
                f"the IDE's model did not answer the sampling request within {self._timeout:g} s "
                "(planner.timeoutSeconds)"
            ) from None
        except MCPError as exc:
            raise PlannerError(
                f"the IDE refused or failed the sampling request: {exc.error.message}. "
                "Allow sampling for agentify in the IDE, or configure OPENAI_API_KEY."
            ) from exc


def _text_message(role: str, text: str) -> types.SamplingMessage:
    return types.SamplingMessage(role=role, content=types.TextContent(type="text", text=text))  # type: ignore[arg-type]


def _blocks(result: SamplingResult) -> list[Any]:
    content = result.content
    return list(content) if isinstance(content, list) else [content]


def _read_answer(result: SamplingResult, use_tools: bool) -> tuple[str | None, Any, str, Any]:
    """(tool name or None, arguments, the model's words, the tool-use block if any)."""
    blocks = _blocks(result)
    said = "\n".join(b.text for b in blocks if isinstance(b, types.TextContent)).strip()
    if use_tools:
        use = next((b for b in blocks if isinstance(b, types.ToolUseContent)), None)
        if use is not None:
            return use.name, dict(use.input), said, use
        return None, None, said, None
    try:
        answer = json.loads(_unfenced(said))
    except json.JSONDecodeError:
        return None, None, said, None
    if not isinstance(answer, dict) or not answer.get("tool"):
        reason = answer.get("reason") if isinstance(answer, dict) else None
        return None, None, str(reason or said), None
    return str(answer["tool"]), answer.get("arguments", {}), "", None


def _check_size(result: SamplingResult) -> None:
    """Raises PlannerError for an answer too long to be a plan (it is never parsed nor searched)."""
    size = 0
    for block in _blocks(result):
        if isinstance(block, types.TextContent):
            size += len(block.text)
        elif isinstance(block, types.ToolUseContent):
            size += len(json.dumps(block.input))
        if size > MAX_REPLY_CHARS:
            raise PlannerError(
                f"the IDE's model answered with more than {MAX_REPLY_CHARS} characters, more than any plan needs, "
                "so the answer was not read. Try again, or use another model in the IDE."
            )


def _unfenced(said: str) -> str:
    """The JSON inside the first Markdown code fence, or the text as it is (linear: no regex)."""
    start = said.find("```")
    if start < 0:
        return said
    body = said[start + 3 :]
    body = body[4:] if body.startswith("json") else body
    end = body.find("```")
    return body if end < 0 else body[:end]


def _repair_messages(result: SamplingResult, tool_use: Any, problem: str) -> list[types.SamplingMessage]:
    fix = (
        f"Error: the arguments do not match the tool's input schema: {problem}. Answer again with corrected arguments."
    )
    if tool_use is None:
        said = "\n".join(b.text for b in _blocks(result) if isinstance(b, types.TextContent))
        return [_text_message("assistant", said), _text_message("user", fix)]
    return [
        types.SamplingMessage(role="assistant", content=[tool_use]),
        types.SamplingMessage(
            role="user",
            content=[
                types.ToolResultContent(
                    type="tool_result",
                    tool_use_id=tool_use.id,
                    content=[types.TextContent(type="text", text=fix)],
                    is_error=True,
                )
            ],
        ),
    ]


def _tool_list(tools: Sequence[CatalogTool]) -> str:
    return "\n".join(
        json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema}) for t in tools
    )
