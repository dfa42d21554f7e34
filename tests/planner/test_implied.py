"""What the words imply: the working directory for a folder task that names no path, the folder the words
name, questions, and "check that X still works" (the planner's half of issue 16, item 6)."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from agentify.errors import NoPlan
from agentify.planner.catalog import Catalog
from tests.planner.support import EXAMPLES, REPO, asks, catalog_of, plan, refusal, tool

pytestmark = pytest.mark.anyio


def annotated(name: str, description: str, read_only: bool, destructive: bool = False) -> types.Tool:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    hints = types.ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive)
    return types.Tool(name=name, description=description, input_schema=schema, annotations=hints)


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("list the files", "list_directory"),
        ("ls", "list_directory"),
        ("list files with their sizes", "list_directory_with_sizes"),
        ("print the directory tree of the project", "directory_tree"),
        ("show me the project structure", "directory_tree"),
    ],
)
async def test_a_folder_task_that_names_no_path_works_on_the_working_directory(query: str, tool: str) -> None:
    result = await plan(query)
    assert (result.tool, result.arguments) == (tool, {"path": str(EXAMPLES)})


async def test_the_folder_the_words_name_is_found_from_the_working_directory() -> None:
    assert (await plan("what files are in the eval folder?")).arguments == {"path": str(EXAMPLES / "eval")}
    assert (await plan("what's in eval?")).tool == "list_directory"
    parent = await plan("what's in the parent directory?", cwd=EXAMPLES / "eval")
    assert (parent.tool, parent.arguments) == ("list_directory", {"path": str(EXAMPLES)})
    search = await plan("search the project for files named routing*")
    assert (search.tool, search.arguments) == ("search_files", {"path": str(EXAMPLES), "pattern": "routing*"})


async def test_where_the_words_give_no_path_it_asks_for_it_or_refuses() -> None:
    unannotated = catalog_of(tool("list_directory", "List the files of a folder", {"path": {"type": "string"}}, "path"))
    for asked in (
        await asks("make a new folder"),  # the working directory is never created or changed
        await asks("list the files", unannotated),  # not declared read-only
    ):
        assert asked.missing.arguments == ("path",) and asked.plan.arguments == {}
    await refusal("read the file")  # a file is never the working directory, and the read tools tie
    assert "send currentWorkingDirectory" in await refusal("list the files", cwd=None)  # no path is read without it


async def test_only_a_read_only_tool_named_for_folders_takes_the_working_directory() -> None:
    catalog = catalog_of(
        annotated("list_folder", "List the entries of a folder", read_only=True),
        annotated("wipe_folder", "Delete every entry of a folder", read_only=False, destructive=True),
    )
    assert (await plan("list the entries", catalog)).arguments == {"path": str(EXAMPLES)}
    wipe = await asks("wipe the entries", catalog)
    assert (wipe.plan.tool, wipe.plan.arguments, wipe.missing.arguments) == ("wipe_folder", {}, ("path",))


async def test_a_question_is_never_answered_by_a_destructive_tool() -> None:
    purge = annotated("purge_cache", "Purge the cache entries of a folder", read_only=False, destructive=True)
    catalog = catalog_of(purge)
    assert (await plan("purge the cache entries of examples", catalog, cwd=REPO)).tool == "purge_cache"
    assert "no tool" in await refusal("which cache entries are in examples?", catalog, cwd=REPO)


async def test_check_that_x_still_works_runs_what_the_test_runner_has_for_x() -> None:
    scenarios = {"scenarioIds": {"type": "array", "items": {"type": "string", "enum": ["login", "checkout"]}}}
    goal = {"goal": {"type": "string"}}
    runner = catalog_of(
        tool("run-arbigent-test-login", "Run the Arbigent scenarios tagged 'login'"),
        tool("run-arbigent-scenarios", "Run chosen Arbigent scenarios by id", scenarios, "scenarioIds"),
        tool(
            "run-arbigent-task",
            "Check one thing in the app: for a request like 'check that ...' or 'verify that ...'",
            goal,
            "goal",
        ),
        backend="arbigent",
    )
    files = catalog_of(tool("search_files", "Search files", {"pattern": {"type": "string"}}, "pattern"), backend="fs")
    catalog = Catalog([*runner.tools.values(), *files.tools.values()])
    assert (await plan("check that login still works", catalog)).tool == "run-arbigent-test-login"
    checkout = await plan("check that the checkout still works", catalog)
    assert (checkout.tool, checkout.arguments) == ("run-arbigent-scenarios", {"scenarioIds": ["checkout"]})
    # More than the scenario, or a tool of another backend ("search"): the runner checks it as a goal in plain words.
    longer = await plan("check that the checkout shows 3 items", catalog)
    assert (longer.tool, longer.arguments) == ("run-arbigent-task", {"goal": "check that the checkout shows 3 items"})
    adhoc = await plan("verify that search still works", catalog)
    assert (adhoc.tool, adhoc.arguments) == ("run-arbigent-task", {"goal": "verify that search still works"})


async def test_a_folder_named_beside_a_path_in_it_or_as_the_backend_is_a_word_not_a_second_value() -> None:
    config = await plan("print the last 20 lines of the arbigent config file arbigent/arbigent-config.yaml")
    path = str(EXAMPLES / "arbigent" / "arbigent-config.yaml")
    assert (config.tool, config.arguments) == ("read_text_file", {"path": path, "tail": 20})
    assert (await plan("which scenarios are in the arbigent project?")).tool == "list-arbigent-scenarios"
    # The project itself ("this project") is where a read-only tool with no path looks: no value it leaves out.
    assert (await plan("what test scenarios does this project have?")).tool == "list-arbigent-scenarios"
    # Not for a tool that acts, nor for "this folder" (a review: "close the browser and delete this folder" closed it)
    for query in ("close the browser and delete this folder", "list the scenarios and copy them to this folder"):
        with pytest.raises(NoPlan):
            await plan(query)
    # A folder that is neither is still a value the tool cannot take: refused, not ignored.
    assert "which argument should take 'eval'" in await refusal("list the arbigent scenarios in eval")


async def test_moving_a_file_into_a_folder_keeps_its_name() -> None:
    into = await plan("move draft.md into the arbigent folder")
    assert into.arguments == {"source": str(EXAMPLES / "draft.md"), "destination": str(EXAMPLES / "arbigent/draft.md")}
    renamed = await plan("rename notes.txt to notes-old.txt")
    assert renamed.arguments == {"source": str(EXAMPLES / "notes.txt"), "destination": str(EXAMPLES / "notes-old.txt")}
    # "rename" gives the new name, even where a folder has it; and only a tool for moving moves into a folder.
    onto = await plan("rename notes.txt to arbigent")
    assert onto.arguments == {"source": str(EXAMPLES / "notes.txt"), "destination": str(EXAMPLES / "arbigent")}
    paths = {"source": {"type": "string"}, "destination": {"type": "string"}}
    unzip = tool("extract_archive", "Extract an archive", paths, "source", "destination")
    extracted = await plan("extract bundle.zip into arbigent", catalog_of(unzip))
    assert extracted.arguments["destination"] == str(EXAMPLES / "arbigent")


async def test_a_path_goes_to_a_tool_that_takes_it_even_when_a_tool_for_urls_ranks_first() -> None:
    for path in ("notes.txt", "arbigent/arbigent-project.yaml"):
        opened = await plan(f"open {path}")
        assert (opened.tool, opened.arguments) == ("read_text_file", {"path": str(EXAMPLES / path)})
    assert (await plan("open localhost:3000")).arguments == {"url": "http://localhost:3000"}
    # Never a lower-ranked tool that changes something: the same tool, not declared destructive, is taken.
    web = tool("open_page", "Open a page: navigate the browser to a URL", {"url": {"type": "string"}}, "url")
    for destructive in (False, True):
        reader = annotated("show_file", "Read a file", read_only=False, destructive=destructive)
        if destructive:
            with pytest.raises(NoPlan, match="cannot fill `url`"):
                await plan("open notes.txt", catalog_of(web, reader))
        else:
            assert (await plan("open notes.txt", catalog_of(web, reader))).tool == "show_file"


async def test_a_search_tool_searches_the_working_directory_when_the_task_names_no_place() -> None:
    here = await plan("search for *.md")
    assert (here.tool, here.arguments) == ("search_files", {"path": str(EXAMPLES), "pattern": "*.md"})


async def test_what_a_file_says_and_summarizing_it_are_reading_it() -> None:
    said = await plan("what does notes.txt say?")
    assert (said.tool, said.arguments) == ("read_text_file", {"path": str(EXAMPLES / "notes.txt")})
    summary = await plan("summarize this file", document=EXAMPLES / "notes.txt")
    assert (summary.tool, summary.arguments) == ("read_text_file", {"path": str(EXAMPLES / "notes.txt")})


async def test_the_tests_of_no_feature_in_particular_are_all_of_them() -> None:
    for query in ("run the tests", "run the full test suite"):
        assert (await plan(query)).tool == "run-arbigent-test-all", query
    for query in ("run the flaky tests", "run the tests on ios", "run the other tests", "run some tests"):
        with pytest.raises(NoPlan):
            await plan(query)
    # Words that another close tool is about are not "no feature in particular".
    checkout = await plan("run the end-to-end test of the checkout")
    assert checkout.tool in ("run-arbigent-test-purchase", "run-arbigent-scenarios")


async def test_between_close_tools_the_one_that_takes_the_choice_a_check_names_wins() -> None:
    # The purchase tests run the checkout scenario too, but only the scenario runner takes "checkout" as said.
    checkout = await plan("check that the checkout still works")
    assert (checkout.tool, checkout.arguments) == ("run-arbigent-scenarios", {"scenarioIds": ["checkout"]})
    # Outside a check, a scenario's name in words picks nothing: "click add to cart" is not the add-to-cart scenario.
    for query in ("click add to cart", "logout"):
        with pytest.raises(NoPlan):
            await plan(query)


async def test_no_plan_ignores_an_id_the_task_writes_that_another_tool_chooses_among() -> None:
    rerun = await plan("rerun the login-wrong-password scenario")
    assert (rerun.tool, rerun.arguments) == ("run-arbigent-scenarios", {"scenarioIds": ["login-wrong-password"]})
    for query in (
        "run settings-language by itself, not the whole settings tag",  # not the settings tests
        "run the settings tests except settings-language",
        "run the login tests, not login-wrong-password",
        "delete settings-language",
        "show me settings-language",
    ):
        await refusal(query)


async def test_a_number_inside_a_goal_is_part_of_it_unless_an_argument_is_named_next_to_it() -> None:
    items = await plan("check that the cart shows 3 items")
    assert items.arguments == {"goal": "check that the cart shows 3 items"}
    # The agent's steps or the app's? Either way a plan would be wrong, so it is a refusal.
    assert "'15'" in await refusal("make sure the About screen shows a version, give the agent at most 15 steps")
    assert "'5'" in await refusal("check that checkout takes at most 5 steps")
    # "no retries" is a number too: the agent's retries, or the app's?
    assert "'no retries'" in await refusal("make sure the help page opens from the menu - no retries")
    empty = "check that the cart shows no items"
    assert (await plan(empty)).arguments == {"goal": empty}


async def test_a_check_may_say_where_before_what() -> None:
    assert (await plan("check on the device that login still works")).tool == "run-arbigent-test-login"
    found = await plan("check on the device that a user can add a product to the wishlist")
    assert (found.tool, found.arguments) == (
        "run-arbigent-task",
        {"goal": "check on the device that a user can add a product to the wishlist"},
    )
    shop = "Check in the shop app that the cart screen has a 'Continue shopping' button."
    assert (await plan(shop)).tool == "run-arbigent-task"  # where, in two words, the second naming the device
    with pytest.raises(NoPlan):  # not "the config file" (a review: it sent the app's agent to read a file)
        await plan("check in the config file that the model is gpt-4")
    # A check is never a tool that says it changes things, but the test runner's (a review: it created a folder).
    message = await refusal("verify in the examples folder that notes.txt exists")
    assert "asks to check something" in message and "create_directory" in message


async def test_a_task_that_asks_to_stop_something_never_starts_it() -> None:
    # each ran the tests it names (older than the round; a review found it)
    for query in ("stop the login tests", "cancel the smoke run", "pause the smoke run", "kill the login tests"):
        assert "asks to stop something" in await refusal(query), query
    assert (await plan("pause for 5 seconds")).tool == "browser_wait_for"


async def test_ids_the_task_writes_choose_among_close_tools() -> None:
    both = await plan("run login-wrong-password and settings-dark-mode")
    assert (both.tool, both.arguments) == (
        "run-arbigent-scenarios",
        {"scenarioIds": ["login-wrong-password", "settings-dark-mode"]},
    )
    # The tool that takes the id, when the task says what it does ("run"); "show me" does not say "run".
    for query in ("run login-wrong-password on its own", "Can you run logout on its own?"):
        alone = await plan(query)
        assert (alone.tool, len(alone.arguments["scenarioIds"])) == ("run-arbigent-scenarios", 1), query
    # ... and only when the ids are all it takes: "the login ones" is the login tag, logout too (a review)
    for query in (
        "show me settings-language",
        "delete settings-language",
        "list settings-language",
        "run the login ones and login-wrong-password",
    ):
        with pytest.raises(NoPlan):
            await plan(query)


async def test_a_folder_named_as_the_tool_is_still_a_value_for_a_tool_that_takes_paths(tmp_path: Path) -> None:
    (tmp_path / "screenshots").mkdir()
    with pytest.raises(NoPlan):
        await plan("take a screenshot into screenshots", cwd=tmp_path)


EVERY_SCENARIO = [
    "launch-app",
    "login",
    "login-wrong-password",
    "logout",
    "search-product",
    "add-to-cart",
    "checkout",
    "settings-dark-mode",
    "settings-language",
]


@pytest.mark.parametrize(
    ("query", "left_out"),
    [
        ("run all the tests except checkout", ["checkout"]),
        ("run every scenario but settings-language", ["settings-language"]),
        ("run all scenarios apart from checkout and logout", ["checkout", "logout"]),
        ("run the whole e2e suite, excluding 'checkout'", ["checkout"]),
        ("run all the tests, and don't run checkout", ["checkout"]),
        ("run all the tests and skip checkout", ["checkout"]),
        ("run all the tests but skip checkout", ["checkout"]),
        ("run all tests without checkout", ["checkout"]),  # "without" names a choice: it ran every test
        (
            "run all the tests except checkout, logout and login-wrong-password",
            ["checkout", "logout", "login-wrong-password"],
        ),
    ],
)
async def test_all_the_scenarios_but_those_the_task_excludes_are_the_other_ids(query: str, left_out: list[str]) -> None:
    result = await plan(query)
    kept = [s for s in EVERY_SCENARIO if s not in left_out]
    assert (result.tool, result.arguments) == ("run-arbigent-scenarios", {"scenarioIds": kept})


async def test_a_list_of_choices_is_never_the_ones_named_when_the_task_wants_all() -> None:
    # Each ran only checkout before: a list of the one id said, the opposite of what was asked.
    for query in ("run all the scenarios, but checkout first", "run everything but checkout", "run all minus checkout"):
        with pytest.raises(NoPlan):
            await plan(query)


async def test_what_the_task_excludes_is_never_what_it_runs() -> None:
    kept = await plan("run checkout and search-product but not logout")
    assert kept.arguments == {"scenarioIds": ["checkout", "search-product"]}
    assert (await plan("list the files by size, not by name")).arguments == {"path": str(EXAMPLES), "sortBy": "size"}


@pytest.mark.parametrize(
    "query",
    [
        "run the settings tests except settings-language",  # the settings tests' other scenario, not every other
        "run all the settings tests except settings-language",
        "run the purchase tests except checkout",
        "run all the tests except login",  # the login scenario, or the tests tagged login?
        "run some tests except checkout",
        "run all the tests except the flaky ones",  # nothing to leave out by
        "list the directory, excluding screenshots",
        "read notes.txt instead of arbigent/arbigent-config.yaml",
        "click e5 but not with shift",  # an optional list is never every other choice
        "run all the tests except logout and the settings ones",  # more than the ids
        "run all the tests except checkout and take a screenshot",
        "list the files in arbigent by size rather than name and show hidden files",
        "run login and every other scenario except checkout",  # every other, not login alone
        "run the login tests, not login-wrong-password",  # the login tag's others, not the `login` scenario
        "print the directory tree of arbigent instead of searching for *.png",  # a replacement, not a filter
        "show the console messages, except errors",  # `level` is `info` by default, which includes errors
        "list the scenarios, but don't show login-wrong-password",  # a filter, not an action it never takes
        "list arbigent, don't include the png files",
        "run the login tests but skip logout",  # the login tag's other scenario: a tag-aware runner's job
        "run the login tests, but ignore logout",
        "which scenarios would the smoke test run, and in what order? don't start anything",  # it ran them
        # from a review: each of these excluded the wrong thing, or the opposite of what was asked
        "search for *.yaml in the project but ignore hidden folders",
        "search for *.md except in nested folders",
        "print the directory tree but skip all but the arbigent folder",
        "search for *.yaml, excluding files other than those in the arbigent folder",
        f"search for *.md but skip {EXAMPLES / 'arbigent'}",  # the server matches relative paths only
    ],
)
async def test_an_exclusion_no_argument_can_honour_is_a_refusal_that_names_it(query: str) -> None:
    message = await refusal(query)
    assert "excludes" in message or "cannot tell which tool" in message


@pytest.mark.parametrize(
    "query",
    [
        "don't run the login tests",
        "Don’t run the login tests",
        "Please, don't run the login tests",
        "I don't want you to run the login tests",
        "Do not delete notes.txt",
        "please never run the tests again",
        "ok so don't run the login tests",
        "no need to run the login tests",
        "you must not run the login tests",
        "never mind the login tests",
        "run the login tests. Actually don't.",
        "move notes.txt to old.txt, or don't, I'm not sure",
    ],
)
async def test_a_task_that_says_what_not_to_do_is_never_planned(query: str) -> None:
    assert "what not to do" in await refusal(query)


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("don't forget to run the login tests", "run-arbigent-test-login"),
        ("Never mind, list the files in arbigent", "list_directory"),
        ('"Don\'t panic" - write that to notes.txt', "write_file"),
        ("Other than that, run the login tests", "run-arbigent-test-login"),  # it opens its sentence: to the comma
        ("list the e2e scenarios with their tags, don't run anything", "list-arbigent-scenarios"),  # read-only
        ("list the scenarios without running them", "list-arbigent-scenarios"),  # "without" names no choice
        ("take a screenshot without scrolling", "browser_take_screenshot"),
    ],
)
async def test_words_that_look_like_a_refusal_but_ask_for_something_are_planned(query: str, tool: str) -> None:
    assert (await plan(query)).tool == tool
    instead = await plan("Instead of running everything, run checkout")
    assert instead.arguments == {"scenarioIds": ["checkout"]}


async def test_the_words_of_a_value_are_no_marker_of_an_exclusion() -> None:
    written = await plan("write 'all but one' to notes.txt")
    assert written.arguments == {"path": str(EXAMPLES / "notes.txt"), "content": "all but one"}


async def test_the_patterns_a_task_excludes_go_to_the_list_of_patterns_to_exclude() -> None:
    tree = await plan("Print the directory tree of arbigent but leave out the *.png files")
    assert (tree.tool, tree.arguments) == (
        "directory_tree",
        {"path": str(EXAMPLES / "arbigent"), "excludePatterns": ["*.png"]},
    )
    # a quoted name or a relative path, as written (the server matches it at any depth or at the top)
    tree = await plan("Print a recursive tree of arbigent, excluding 'arbigent-result'.")
    assert tree.arguments == {"path": str(EXAMPLES / "arbigent"), "excludePatterns": ["arbigent-result"]}
    png = await plan("search for *.png in arbigent but ignore the 'tmp' folder")
    assert png.arguments == {"path": str(EXAMPLES / "arbigent"), "pattern": "*.png", "excludePatterns": ["tmp"]}
    markdown = await plan("search for *.md but not in arbigent")
    assert markdown.arguments == {"path": str(EXAMPLES), "pattern": "*.md", "excludePatterns": ["arbigent"]}
    found = await plan("search for *.yaml in arbigent, excluding *-config.yaml and *.yml")
    assert found.arguments == {
        "path": str(EXAMPLES / "arbigent"),
        "pattern": "*.yaml",
        "excludePatterns": ["*-config.yaml", "*.yml"],
    }
