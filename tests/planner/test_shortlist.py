from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentify.config import PlannerConfig
from agentify.planner.retrieval import ToolIndex
from agentify.planner.select import PlannerSelector
from agentify.planner.shortlist import GROWTH, shortlist
from tests.fakes.model_server import ModelServer, Reply
from tests.planner.support import example_catalog, task


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


def test_a_catalog_no_larger_than_the_limit_is_offered_whole() -> None:
    catalog = example_catalog()
    assert len(shortlist(ToolIndex(catalog), task("read notes.txt"), 47)) == 47


def test_a_large_catalog_offers_the_best_ranked_tools_first() -> None:
    index = ToolIndex(example_catalog(generated=True))
    offered = shortlist(index, task("take a screenshot of the page"), 24)
    assert 24 <= len(offered) <= 24 * GROWTH and offered[0].tool.name == "browser_take_screenshot"
    offered = shortlist(index, task("run the login tests"), 5)
    assert "run-arbigent-test-login" in [t.tool.name for t in offered]


def test_every_tool_of_a_backend_the_task_names_is_offered() -> None:
    index = ToolIndex(example_catalog(generated=True))
    offered = shortlist(index, task("use the browser to take a screenshot"), 5)
    browser = [t for t in offered if t.backend == "browser"]
    assert len(browser) == 25 and len(offered) == 25 + len([t for t in offered[:5] if t.backend != "browser"])


@pytest.mark.anyio
async def test_the_openai_planner_is_offered_only_the_shortlist_and_records_it(model: ModelServer) -> None:
    selector = PlannerSelector(PlannerConfig(api_key="sk-test", base_url=model.base_url, max_retries=0, shortlist=6))
    model.push(Reply.tool_call("browser__browser_navigate", {"url": "http://localhost:3000/login"}))
    try:
        planner = selector.choose()
        plan = await planner.plan(task("open localhost:3000/login"), example_catalog(generated=True))
    finally:
        await selector.aclose()
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert len(offered) == 6 and "browser__browser_navigate" in offered
    assert (plan.planner, plan.usage.tools_offered, plan.usage.prompt_tokens) == ("openai", 6, 120)
