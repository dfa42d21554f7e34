"""Which planner answers a task, and why (shown by `list_backends`, `doctor` and the console)."""

from __future__ import annotations

from dataclasses import dataclass

import openai

from agentify.config import PlannerConfig
from agentify.errors import PlannerUnavailable
from agentify.planner import Planner
from agentify.planner.openai import OpenAIPlanner


@dataclass(frozen=True)
class PlannerChoice:
    name: str | None
    reason: str


class PlannerSelector:
    """Builds the openai client once; `choose` picks per task (sampling depends on the client)."""

    def __init__(self, config: PlannerConfig) -> None:
        self.config = config
        self._openai: OpenAIPlanner | None = None
        if config.api_key and config.provider in ("auto", "openai"):
            client = openai.AsyncOpenAI(
                api_key=config.api_key,
                base_url=config.base_url,
                timeout=config.timeout_seconds,
                max_retries=config.max_retries,
            )
            self._openai = OpenAIPlanner(client, config.model)

    def describe(self, sampling_available: bool = False) -> PlannerChoice:
        provider = self.config.provider
        if self._openai is not None:
            why = "an API key is configured" if provider == "auto" else "planner.provider is openai"
            return PlannerChoice("openai", f"openai ({self.config.model}): {why}")
        if provider == "openai":
            return PlannerChoice(None, "planner.provider is openai but no API key is configured")
        if provider in ("sampling", "offline"):
            return PlannerChoice(None, f"the {provider} planner is not available in this version of agentify")
        return PlannerChoice(None, "no planner: no OpenAI API key is configured")

    def choose(self, sampling_available: bool = False) -> Planner:
        if self._openai is not None:
            return self._openai
        choice = self.describe(sampling_available)
        raise PlannerUnavailable(
            f"cannot plan this task: {choice.reason}. Set OPENAI_API_KEY (or planner.apiKey in the config, "
            "or OPENAI_API_KEY in the MCP server's initializationOptions); for a local OpenAI-compatible "
            "server (Ollama, vLLM, LM Studio) also set OPENAI_BASE_URL."
        )

    async def aclose(self) -> None:
        if self._openai is not None:
            await self._openai.aclose()
