"""The OpenAI planner: one chat-completions request with the catalog as functions.

Works with any OpenAI-compatible endpoint (`baseUrl`): OpenAI, Azure, Ollama, vLLM,
LM Studio. Retries of 429 (honouring Retry-After), 5xx and timeouts are the openai
client's own (`max_retries`); what still fails becomes `PlannerError`. Arguments that
fail the tool's schema get one repair round trip that tells the model the error. The model
sees the tools it is offered (the shortlist of a large catalog, see `shortlist.py`).

Raises: NoPlan, InvalidPlan, PlannerError.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import openai
from loguru import logger

from agentify.config import PlannerConfig
from agentify.errors import InvalidPlan, NoPlan, PlannerError
from agentify.planner import Plan, PlanUsage, TaskInput
from agentify.planner.catalog import Catalog, CatalogTool
from agentify.planner.prompt import SYSTEM_PROMPT, user_message


class OpenAIPlanner:
    name = "openai"

    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self._client = client
        self._model = model

    @classmethod
    def from_config(cls, config: PlannerConfig) -> OpenAIPlanner:
        client = openai.AsyncOpenAI(
            api_key=config.api_key,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
        )
        return cls(client, config.model)

    async def aclose(self) -> None:
        await self._client.close()

    async def plan(self, task: TaskInput, catalog: Catalog, offered: Sequence[CatalogTool] | None = None) -> Plan:
        """Offers `offered` (default: the whole catalog); the chosen tool is looked up in `catalog`."""
        tools = list(catalog.tools.values()) if offered is None else list(offered)
        if not tools:
            raise NoPlan("no backend tools are available to plan with: check `list_backends` for failed backends")
        functions = [_function(tool) for tool in tools]
        messages = _messages(task)
        usage = _Usage()
        for attempt in range(2):
            message = await self._complete(messages, functions, usage)
            calls = message.tool_calls or []
            if not calls:
                words = (message.content or "").strip() or "(the model gave no reason)"
                raise NoPlan(f"the planner found no tool for this task. It said: {words}")
            call = calls[0]
            name = call.function.name
            tool = catalog.get(name)
            if tool is None:
                raise InvalidPlan(
                    f"the model chose {name!r}, which is not one of the {len(functions)} offered tools; "
                    "rephrase the task or check `list_backends`"
                )
            arguments, problem = _parse_arguments(call.function.arguments, tool)
            if problem is None:
                return Plan(
                    backend=tool.backend,
                    handle=tool.handle,
                    tool=tool.tool.name,
                    arguments=arguments,
                    planner=self.name,
                    reasoning=(message.content or None),
                    usage=usage.freeze(self._model, len(functions)),
                )
            if attempt == 1:
                raise InvalidPlan(
                    f"the model's arguments for {tool.backend}.{tool.tool.name} still fail its input schema "
                    f"after one repair: {problem}. Rephrase the task with the missing details."
                )
            logger.info("plan arguments invalid ({}); asking the model to repair them", problem)
            messages.append(message.model_dump(exclude_none=True, exclude_unset=True))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": f"Error: the arguments do not match the tool's input schema: {problem}. "
                    "Call the tool again with corrected arguments.",
                }
            )
        raise AssertionError("unreachable")

    async def _complete(self, messages: list[dict[str, Any]], functions: list[dict[str, Any]], usage: _Usage) -> Any:
        with _map_openai_errors():
            response = await self._client.chat.completions.create(  # type: ignore[call-overload]
                model=self._model,
                messages=messages,
                tools=functions,
                tool_choice="auto",
                parallel_tool_calls=False,
            )
        usage.add(response.usage)
        if not response.choices:
            raise PlannerError("the model endpoint answered without any choice; check the model name and server")
        return response.choices[0].message


class _Usage:
    def __init__(self) -> None:
        self.prompt = self.completion = self.requests = 0

    def add(self, usage: Any) -> None:
        self.requests += 1
        if usage is not None:
            self.prompt += usage.prompt_tokens or 0
            self.completion += usage.completion_tokens or 0

    def freeze(self, model: str, offered: int) -> PlanUsage:
        return PlanUsage(
            provider="openai",
            model=model,
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            requests=self.requests,
            tools_offered=offered,
        )


def estimate_prompt_tokens(task: TaskInput, tools: Sequence[CatalogTool]) -> int:
    """About how many prompt tokens the first request for `task` costs when offering `tools`:
    its JSON at about 4 characters per token (for when the endpoint does not count them)."""
    request = {"messages": _messages(task), "tools": [_function(tool) for tool in tools]}
    return math.ceil(len(json.dumps(request)) / 4)


def _messages(task: TaskInput) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_message(task)}]


def _function(tool: CatalogTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description[:1024], "parameters": tool.input_schema},
    }


def _parse_arguments(raw: str | None, tool: CatalogTool) -> tuple[dict[str, Any], str | None]:
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg})"
    problem = tool.validation_error(arguments)
    return (arguments if isinstance(arguments, dict) else {}), problem


@contextmanager
def _map_openai_errors() -> Iterator[None]:
    try:
        yield
    except openai.AuthenticationError as exc:
        raise PlannerError(
            "the model endpoint rejected the API key (401): set a valid OPENAI_API_KEY or planner.apiKey"
        ) from exc
    except openai.NotFoundError as exc:
        raise PlannerError(
            f"the model endpoint answered 404 ({_detail(exc)}): check planner.model / AGENTIFY_MODEL and baseUrl"
        ) from exc
    except openai.RateLimitError as exc:
        raise PlannerError(
            f"the model endpoint is rate limiting (429) and retries ran out: {_detail(exc)}. Try again shortly."
        ) from exc
    except openai.APIStatusError as exc:
        raise PlannerError(
            f"the model endpoint failed with HTTP {exc.status_code} after retries: {_detail(exc)}"
        ) from exc
    except openai.APITimeoutError as exc:
        raise PlannerError(
            "the model endpoint did not answer in time after retries; raise planner.timeoutSeconds or check the server"
        ) from exc
    except openai.APIConnectionError as exc:
        raise PlannerError(
            f"cannot reach the model endpoint ({exc.__cause__ or exc}): check OPENAI_BASE_URL / planner.baseUrl"
        ) from exc
    except openai.APIError as exc:  # e.g. a 200 whose body is not a chat completion
        raise PlannerError(f"the model endpoint gave an unusable answer: {exc.message[:300]}") from exc


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)[:300]
    return str(exc.message)[:300]
