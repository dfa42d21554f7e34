from __future__ import annotations

from typing import Any

import pytest

from agentify.config import PlannerConfig
from agentify.errors import PlannerUnavailable
from agentify.planner.select import PlannerSelector


class FakeSampler:
    supports_tools = False

    async def create(self, messages: Any, *, system_prompt: str, tools: Any) -> Any:
        raise AssertionError("not called in these tests")


@pytest.mark.anyio
async def test_auto_is_openai_with_a_key_else_sampling_when_offered_else_offline() -> None:
    keyed = PlannerSelector(PlannerConfig(api_key="sk-test"))
    assert keyed.choose(sampler=FakeSampler()).name == "openai"
    assert keyed.describe().reason.endswith("an API key is configured")
    await keyed.aclose()
    plain = PlannerSelector(PlannerConfig())
    assert plain.choose(sampler=FakeSampler()).name == "sampling"
    assert plain.describe(sampling_available=True).name == "sampling"
    assert plain.choose().name == "offline"
    choice = plain.describe()
    assert choice.name == "offline" and "no API key" in choice.reason and "OPENAI_API_KEY" in choice.reason


@pytest.mark.parametrize(
    ("provider", "missing"), [("openai", "no API key is configured"), ("sampling", "does not offer MCP sampling")]
)
def test_an_explicit_provider_that_cannot_be_used_is_planner_unavailable(provider: str, missing: str) -> None:
    selector = PlannerSelector(PlannerConfig(provider=provider))  # type: ignore[arg-type]
    assert selector.describe().name is None
    with pytest.raises(PlannerUnavailable) as caught:
        selector.choose()
    assert missing in caught.value.message and "OPENAI_API_KEY" in caught.value.message


def test_offline_can_be_forced_even_with_a_key() -> None:
    selector = PlannerSelector(PlannerConfig(provider="offline", api_key="sk-test"))
    assert selector.choose().name == "offline"
    assert selector.describe().reason == "offline (no model): planner.provider is offline"
