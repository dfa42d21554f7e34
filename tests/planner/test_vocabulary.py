"""The offline planner fills what the words name: element refs, key names, flags and quoted texts."""

from __future__ import annotations

import pytest

from agentify.errors import BackendUnavailable
from agentify.eval.routing import evaluate, load_cases
from agentify.planner.catalog import Catalog, MissingBackend
from agentify.planner.offline import OfflinePlanner
from agentify.planner.offline.vocabulary import key_name
from agentify.planner.retrieval import ToolIndex
from tests.planner.support import EXAMPLES, REPO, example_catalog, plan, task

pytestmark = pytest.mark.anyio
FRESH = REPO / "examples" / "eval" / "routing-fresh.jsonl"


@pytest.mark.parametrize(
    ("query", "tool", "arguments"),
    [
        ("click e5", "browser_click", {"target": "e5"}),
        ("double click the element e12", "browser_click", {"target": "e12", "doubleClick": True}),
        ("press Enter", "browser_press_key", {"key": "Enter"}),
        ("hit the Escape key", "browser_press_key", {"key": "Escape"}),
        ("press Control+A", "browser_press_key", {"key": "Control+A"}),
        ("type 'hello world' into e3", "browser_type", {"target": "e3", "text": "hello world"}),
        ("drag e4 onto e8", "browser_drag", {"startTarget": "e4", "endTarget": "e8"}),
        ("accept the dialog", "browser_handle_dialog", {"accept": True}),
        ("wait for 'Order confirmed' to appear", "browser_wait_for", {"text": "Order confirmed"}),
        ("select 'Large' in the dropdown e9", "browser_select_option", {"target": "e9", "values": ["Large"]}),
        # everyday words for what the tools call otherwise
        ("Pick 'Germany' in the dropdown e9.", "browser_select_option", {"target": "e9", "values": ["Germany"]}),
        ("Pause for 5 seconds so the page can finish loading.", "browser_wait_for", {"time": 5}),
        ("hang on 5 seconds, the page is still loading", "browser_wait_for", {"time": 5}),
        ("which directories are you actually permitted to touch?", "list_allowed_directories", {}),
        ("Shut down the browser page, I'm done with it.", "browser_close", {}),
        ("accept the alert", "browser_handle_dialog", {"accept": True}),
        (
            "Type 'coffee mug' into the search field e5 and submit it.",
            "browser_type",
            {"target": "e5", "text": "coffee mug", "submit": True},
        ),
    ],
)
async def test_arguments_the_words_name_are_filled(query: str, tool: str, arguments: dict[str, object]) -> None:
    chosen = await plan(query)
    assert (chosen.tool, chosen.arguments) == (tool, arguments)


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("check that login works", "run-arbigent-test-login"),
        ("make sure the purchase flow still works", "run-arbigent-test-purchase"),
        ("verify the settings screens", "run-arbigent-test-settings"),
    ],
)
async def test_check_that_it_works_runs_the_tag_tool(query: str, tool: str) -> None:
    chosen = await plan(query)
    assert (chosen.backend, chosen.tool, chosen.arguments) == ("arbigent", tool, {})


def test_a_key_word_is_a_key_only_where_a_key_is_named() -> None:
    assert key_name("Enter", ["press"], "") == "Enter"
    assert key_name("tab", ["press", "the"], "key") == "Tab"
    assert key_name("Enter", ["then"], "the") is None  # "then enter the text"
    assert key_name("Submit", ["press", "the"], "button") is None


async def test_the_fresh_routing_set_is_right_at_least_80_percent_with_at_most_one_wrong_plan() -> None:
    cases = load_cases(FRESH, str(REPO))
    assert len(cases) >= 50
    for catalog in (example_catalog(), example_catalog(generated=True)):
        report = await evaluate(OfflinePlanner(), ToolIndex(catalog), cases, 24)
        wrong = [r.case.task.query for r in report.results if r.verdict == "wrong"]
        assert report.accuracy >= 0.80, "\n".join(report.lines())
        assert len(wrong) <= 1, wrong


async def test_a_task_for_an_unavailable_backend_says_so_instead_of_picking_another_tool() -> None:
    full = example_catalog()
    offered = [t for t in full.tools.values() if t.backend != "arbigent"]
    reason = "failed: the arbigent CLI was not found"
    description = "Arbigent end-to-end tests of the example shopping app (login, smoke, purchase, settings)"
    catalog = Catalog(offered, [MissingBackend("arbigent", description, reason)])
    with pytest.raises(BackendUnavailable) as raised:
        await OfflinePlanner().plan(task("run the login tests"), catalog)
    assert "'arbigent'" in raised.value.message and reason in raised.value.message
    assert "browser_run_code_unsafe" not in raised.value.message
    # A task for the tools that are there is still planned.
    assert (await OfflinePlanner().plan(task("click e5"), catalog)).tool == "browser_click"


async def test_pronouns_are_small_words_not_words_a_tool_must_match() -> None:
    both = await plan("open notes.txt and arbigent/arbigent-config.yaml together so I can compare them")
    assert (both.tool, both.arguments) == (
        "read_multiple_files",
        {"paths": [str(EXAMPLES / "notes.txt"), str(EXAMPLES / "arbigent" / "arbigent-config.yaml")]},
    )


async def test_a_file_containing_a_text_is_its_content() -> None:
    todo = await plan("Create a file todo.md containing just the line '# TODO'")
    assert (todo.tool, todo.arguments) == ("write_file", {"path": str(EXAMPLES / "todo.md"), "content": "# TODO"})
