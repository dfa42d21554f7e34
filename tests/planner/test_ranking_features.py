"""What the hybrid ranking adds over BM25F, checked on the lexical side (no model needed): a task's
sentences, a tool's siblings rising with it, and a multi-request query's parts after the whole's best."""

from __future__ import annotations

from dataclasses import replace

import mcp_types as types

from agentify.planner.catalog import Catalog
from agentify.planner.retrieval import LEXICAL_ONLY, ToolIndex
from agentify.planner.search import MAX_REQUESTS, requests, search_tools
from agentify.planner.words import MAX_SENTENCES, sentences
from tests.planner.support import tool

SERVICES = Catalog.build(
    [
        (
            "football",
            "football data",
            [
                tool("player_search", "Search football players by name"),
                tool("player_moves", "Moves of a player between clubs"),
            ],
        ),
        ("money", "payments", [tool("money_transfer", "Send a money transfer")]),
    ]
)


def test_a_task_is_split_into_its_sentences_and_a_long_one_keeps_its_tail_together() -> None:
    assert sentences("Find Messi. Then show his transfers? Thanks!") == [
        "Find Messi.",
        "Then show his transfers?",
        "Thanks!",
    ]
    assert sentences("version 1.5 of the api") == ["version 1.5 of the api"]
    many = sentences(" ".join(f"Part {i}." for i in range(12)))
    assert len(many) == MAX_SENTENCES and many[-1].startswith(f"Part {MAX_SENTENCES - 1}.") and "Part 11." in many[-1]


def test_the_siblings_of_the_best_tool_rise_with_it_and_the_best_tool_stays_first() -> None:
    query = "search football players by name: Messi, and a transfer"
    alone = ToolIndex(SERVICES, replace(LEXICAL_ONLY, backend=0.0)).search(query)
    together = ToolIndex(SERVICES, replace(LEXICAL_ONLY, backend=1.0)).search(query)
    assert alone[0].tool.name == together[0].tool.name == "football__player_search"
    assert [r.tool.name for r in alone][1] == "money__money_transfer"
    assert [r.tool.name for r in together][1] == "football__player_moves"


def test_each_part_of_a_query_for_several_tools_follows_the_whole_querys_first_tools() -> None:
    index = ToolIndex(SERVICES, LEXICAL_ONLY)
    query = "search the player Messi and then send a money transfer"
    whole = [r.tool.name for r in search_tools(index, "search the player Messi send a money transfer", 3)]
    found = [r.tool.name for r in search_tools(index, query, 3)]
    assert set(found) == set(whole) == set(SERVICES.tools)
    assert found[0] == whole[0]


MOVIES = Catalog.build(
    [
        (
            "films",
            "",
            [
                tool("movie_reviews", "Reviews of a movie", {"movie_id": {"type": "integer"}}, "movie_id"),
                tool("search_movie", "Look a title up"),
                tool("search_person", "Look a name up"),
                tool("movie_reviews_by_critic", "What critics say about films and reviews of movies"),
            ],
        )
    ]
)


def test_the_tool_that_finds_an_id_follows_the_tool_that_needs_it() -> None:
    index = ToolIndex(MOVIES, LEXICAL_ONLY)
    found = [r.tool.tool.name for r in index.search("reviews of the movie Titanic")]
    assert found[:2] == ["movie_reviews", "search_movie"]
    plain = [
        r.tool.tool.name for r in ToolIndex(MOVIES, replace(LEXICAL_ONLY, provider=0.0)).search("reviews of movie")
    ]
    assert plain.index("search_movie") > plain.index("movie_reviews_by_critic")


TIPS = Catalog.build(
    [
        (
            "tips",
            "betting tips",
            [tool("best_goal", "Best goal prediction tips"), tool("daily_quote", "A quote of the day")],
        ),
        (
            "football",
            "football statistics",
            [
                tool("goal_stats", "Goal statistics of today's football matches"),
                tool("match_goals", "Goal predictions for football matches"),
            ],
        ),
    ]
)


def test_each_request_of_a_query_gets_a_place_before_more_of_what_the_first_already_answers() -> None:
    query = "Give me the best goal prediction for football matches. Also, a daily quote"
    assert requests(query) == ["Give me the best goal prediction for football matches.", "Also, a daily quote"]
    index = ToolIndex(TIPS, replace(LEXICAL_ONLY, backend=0.0))
    whole = [r.tool.tool.name for r in index.search(query, limit=4)]
    found = [r.tool.tool.name for r in search_tools(index, query, 2)]
    assert whole.index("daily_quote") > 1  # the whole query alone ranks it below the first request's other tools
    assert found == [whole[0], "daily_quote"]
    assert requests("get the weather for Paris") == []
    many = requests(" and ".join(f"read file {i}" for i in range(20)))
    assert len(many) == MAX_REQUESTS and many[-1].startswith(f"read file {MAX_REQUESTS - 1}") and "file 19" in many[-1]


FOLDER = Catalog.build(
    [
        (
            "files",
            "",
            [
                tool("delete_files", "Delete files of a folder").model_copy(
                    update={"annotations": types.ToolAnnotations(destructive_hint=True)}
                ),
                tool("list_files", "List the files of a folder"),
                tool("read_note", "Read a note"),
            ],
        ),
        ("weather", "", [tool("get_weather", "Weather forecast for a city")]),
    ]
)


def test_a_question_of_several_requests_gets_a_destructive_tool_only_after_every_other() -> None:
    index = ToolIndex(FOLDER, LEXICAL_ONLY)
    question = "which files of the folder are deleted files? And what is the weather forecast for Paris?"
    found = [r.tool.tool.name for r in search_tools(index, question, 4)]
    assert set(found[:2]) == {"list_files", "get_weather"} and found[-1] == "delete_files"  # a question reads too
    # Asked to do it, the destructive tool is the best, and the weather has its place too.
    found = [
        r.tool.tool.name for r in search_tools(index, "delete the files of the folder and get the weather for Paris", 4)
    ]
    assert found[:2] == ["delete_files", "get_weather"]
