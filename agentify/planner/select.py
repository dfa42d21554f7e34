"""Which planner answers a task, and why (shown by `list_backends`, `doctor` and the console).

    planner.provider   API key   client offers sampling   planner
    openai             yes       -                        openai
    openai             no        -                        none: planner_unavailable
    sampling           -         yes                      sampling
    sampling           -         no                       none: planner_unavailable
    offline            -         -                        offline
    auto               yes       -                        openai
    auto               no        yes                      sampling
    auto               no        no                       offline

The model planners (openai, sampling) are offered the shortlist of a large catalog; all
planners share one retrieval index cache, so an index is built once per set of tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentify.config import PlannerConfig
from agentify.errors import PlannerUnavailable
from agentify.planner import Planner
from agentify.planner.catalog import Catalog
from agentify.planner.indexes import IndexCache
from agentify.planner.offline import OfflinePlanner
from agentify.planner.retrieval import ToolIndex
from agentify.planner.sampling import Sampler, SamplingPlanner
from agentify.planner.shortlist import Shortlisted

if TYPE_CHECKING:
    from agentify.planner.openai import OpenAIPlanner

HOW_TO_CONFIGURE = (
    "Set OPENAI_API_KEY (or planner.apiKey in the config, or OPENAI_API_KEY in the MCP server's "
    "initializationOptions); for a local OpenAI-compatible server (Ollama, vLLM, LM Studio) also set "
    "OPENAI_BASE_URL. planner.provider (or AGENTIFY_PLANNER) chooses among auto, openai, sampling and offline."
)


@dataclass(frozen=True)
class PlannerChoice:
    name: str | None
    reason: str


class PlannerSelector:
    """Builds the openai client once; `choose` picks per task (sampling depends on the client)."""

    def __init__(self, config: PlannerConfig) -> None:
        self.config = config
        self._indexes = IndexCache()
        self._offline = OfflinePlanner(self._indexes)
        self._openai: OpenAIPlanner | None = None
        if config.api_key and config.provider in ("auto", "openai"):
            # imported here: the openai package costs a gateway without a key 0.8 s of CPU at start
            from agentify.planner.openai import OpenAIPlanner

            self._openai = OpenAIPlanner.from_config(config)

    def index(self, catalog: Catalog) -> ToolIndex:
        """The retrieval index of `catalog`, the one every planner ranks with; built once per set of tools."""
        return self._indexes.get(catalog)

    def describe(self, sampling_available: bool = False) -> PlannerChoice:
        provider = self.config.provider
        model = f"openai ({self.config.model})"
        if provider == "openai":
            if self._openai is not None:
                return PlannerChoice("openai", f"{model}: planner.provider is openai")
            return PlannerChoice(None, "planner.provider is openai but no API key is configured")
        if provider == "sampling":
            if sampling_available:
                return PlannerChoice("sampling", "sampling (the IDE's model): planner.provider is sampling")
            return PlannerChoice(None, "planner.provider is sampling but the client does not offer MCP sampling")
        if provider == "offline":
            return PlannerChoice("offline", "offline (no model): planner.provider is offline")
        if self._openai is not None:
            return PlannerChoice("openai", f"{model}: an API key is configured")
        if sampling_available:
            return PlannerChoice(
                "sampling", "sampling (the IDE's model): no API key is configured and the client offers MCP sampling"
            )
        return PlannerChoice(
            "offline",
            "offline (no model): no API key is configured and no client offers MCP sampling; it acts only on "
            "clear tasks, so set OPENAI_API_KEY for a model planner",
        )

    def choose(self, sampler: Sampler | None = None) -> Planner:
        """The planner for one task; `sampler` is the client's, when it offers MCP sampling.

        Raises:
            PlannerUnavailable: the configured provider cannot be used (no key, no sampling).
        """
        choice = self.describe(sampling_available=sampler is not None)
        limit = self.config.shortlist
        if choice.name == "openai" and self._openai is not None:
            return Shortlisted(self._openai, self._indexes, limit)
        if choice.name == "sampling" and sampler is not None:
            return Shortlisted(SamplingPlanner(sampler, self.config.timeout_seconds), self._indexes, limit)
        if choice.name == "offline":
            return self._offline
        raise PlannerUnavailable(f"cannot plan this task: {choice.reason}. {HOW_TO_CONFIGURE}")

    async def aclose(self) -> None:
        if self._openai is not None:
            await self._openai.aclose()
