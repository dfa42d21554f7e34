"""The runner's tools as the gateway's offline planner sees them: names and descriptions route well."""

from __future__ import annotations

import pytest

from agentify.arbigent.catalog import build_catalog
from agentify.arbigent.project import load_project
from agentify.arbigent.tools import tools_for
from agentify.errors import NoPlan
from agentify.planner import TaskInput
from agentify.planner.catalog import Catalog
from agentify.planner.offline import OfflinePlanner

from .support import EXAMPLES

pytestmark = pytest.mark.anyio

CATALOG = Catalog.build(
    [
        (
            "arbigent",
            "Arbigent end-to-end tests",
            tools_for(build_catalog(load_project(EXAMPLES / "arbigent-project.yaml"))),
        )
    ]
)


async def plan(query: str) -> tuple[str, dict[str, object]]:
    chosen = await OfflinePlanner().plan(TaskInput(query=query), CATALOG)
    return chosen.tool, chosen.arguments


@pytest.mark.parametrize(
    "query",
    [
        "check that the login screen shows an error for a wrong password",
        "Check that dark mode can be turned on in Settings",
        "verify whether the checkout shows 3 items",
        "make sure the cart badge shows 1 after adding a mug",
    ],
)
async def test_a_request_to_check_something_is_an_ad_hoc_task_with_the_request_as_its_goal(query: str) -> None:
    assert await plan(query) == ("run-arbigent-task", {"goal": query})


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("run the login tests", "run-arbigent-test-login"),
        ("run all the arbigent tests", "run-arbigent-test-all"),
        ("test the settings screens of the app", "run-arbigent-test-settings"),
        ("which arbigent scenarios are there?", "list-arbigent-scenarios"),
    ],
)
async def test_requests_to_run_tests_still_go_to_the_test_tools(query: str, tool: str) -> None:
    assert (await plan(query))[0] == tool


async def test_a_check_that_names_a_file_is_not_taken_for_a_device_task() -> None:
    with pytest.raises(NoPlan):
        await plan("check that notes.txt exists")
