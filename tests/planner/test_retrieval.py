from __future__ import annotations

from agentify.planner.indexes import IndexCache
from agentify.planner.retrieval import ToolIndex
from agentify.planner.words import query_terms, stem, words
from tests.planner.support import catalog_of, example_catalog, tool


def top(index: ToolIndex, query: str) -> str:
    return index.rank(query_terms(query))[0].tool.tool.name


def test_identifiers_split_into_words_and_stop_words_are_dropped() -> None:
    assert words("readTextFile run-arbigent-test-login list_directory") == [
        "read", "text", "fil", "run", "arbigent", "test", "login", "list", "directory"
    ]  # fmt: skip
    assert words("show me the files in a folder") == ["show", "fil", "folder"]


def test_plurals_and_verb_forms_meet_at_one_stem() -> None:
    for a, b in [("files", "file"), ("directories", "directory"), ("running", "run"), ("created", "create")]:
        assert stem(a) == stem(b), (a, b)


def test_the_tool_the_query_describes_ranks_first_on_the_real_example_tools() -> None:
    index = ToolIndex(example_catalog())
    assert top(index, "take a screenshot of the page") == "browser_take_screenshot"
    assert top(index, "run the login tests") == "run-arbigent-test-login"
    assert top(index, "which directories am I allowed to access") == "list_allowed_directories"
    assert top(index, "make a new folder") == "create_directory"


def test_parameters_and_the_backend_description_are_indexed_too() -> None:
    catalog = catalog_of(
        tool("t1", "Does a thing", {"repository": {"type": "string", "description": "where the invoices live"}}),
        tool("t2", "Does another thing"),
        tool("t3", "Does a third thing"),
    )
    index = ToolIndex(catalog)
    assert top(index, "repository") == "t1"
    assert top(index, "invoices") == "t1"
    other = catalog_of(tool("t9", "Something"), backend="ledger", description="Accounting of the shop")
    assert ToolIndex(other).rank(query_terms("accounting"))[0].score > 0


def test_the_index_is_cached_by_content_and_rebuilt_when_tools_change() -> None:
    cache = IndexCache()
    first = cache.get(example_catalog())
    assert cache.get(example_catalog()) is first  # a new but equal catalog, as each task builds one
    changed = catalog_of(tool("read_text_file", "Read a file"), backend="filesystem")
    assert cache.get(changed) is not first
    assert cache.get(changed) is cache.get(catalog_of(tool("read_text_file", "Read a file"), backend="filesystem"))
    assert cache.get(catalog_of(tool("read_text_file", "Read a text file"), backend="filesystem")) is not first


def test_a_backend_is_named_by_its_id_as_a_word() -> None:
    index = ToolIndex(example_catalog())
    assert index.named_backends("use the browser to open it") == {"browser"}
    assert index.named_backends("run the arbigent tests") == {"arbigent"}
    assert index.named_backends("read the file") == set()
