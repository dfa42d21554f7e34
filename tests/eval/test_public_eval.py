"""`agentify eval --mode public`: the shipped public sets, a slice of each, measured beside plain BM25.

Only the report's shape is checked here; the figures come from the full run (docs/planning.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentify.eval.public import PARTS, available, load_public, part
from tests.eval.test_eval_command import agentify_eval

METRICS = {"queries", "recall@1", "recall@5", "recall@10", "ndcg@5", "multiTool", "allInTop5"}


def test_each_shipped_set_says_where_it_comes_from_and_splits_its_queries() -> None:
    assert set(available()) >= {"metatool", "toolalpaca", "restbench", "toolbench", "bfcl-live"}
    for name in available():
        public = load_public(name)
        assert {"repo", "commit", "licence", "paper"} <= public.source.keys()
        tune, heldout = public.select("tune"), public.select("heldout")
        assert (not tune if public.check else tune) and heldout and len(tune) + len(heldout) == len(public.queries)
        assert not {q.text for q in tune} & {q.text for q in heldout}
        names = {(b, t.name) for b, _, tools in public.backends for t in tools}
        assert all(needed in names for q in public.queries for needed in q.tools)
    assert part("the same text") == part("  The same text ") and "all" in PARTS
    assert [name for name in available() if load_public(name).check] == ["bfcl-live"]  # nothing is fitted on it


def test_eval_public_on_a_slice_reports_search_tools_beside_bm25(tmp_path: Path) -> None:
    done = agentify_eval("all", "--mode", "public", "--sample", "6", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    assert sorted(r["set"] for r in reports) == sorted(available())
    for report in reports:
        assert report["part"] == "heldout" and report["searchTools"]["queries"] == 6
        assert report["checkSet"] == (report["set"] == "bfcl-live")
        assert METRICS <= report["searchTools"].keys() and METRICS <= report["bm25"].keys()
        assert {"right", "wrong", "refused", "total", "askedRight", "askedWrong"} <= report["offlinePlanner"].keys()
        assert {"holdsRight", "holdsAllOfMulti", "meanSize", "baseK"} <= report["shortlist"].keys()
        assert report["source"]["repo"] and report["catalogTools"] > 50
    text = agentify_eval("restbench", "--mode", "public", "--sample", "4", "--part", "tune", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "search_tools" in text.stdout and "BM25" in text.stdout and "recall@5" in text.stdout
    assert "restbench (tune part, 4 queries" in text.stdout and "offline planner" in text.stdout
    check = agentify_eval("bfcl-live", "--mode", "public", "--sample", "2", cwd=tmp_path)
    assert check.returncode == 0 and "bfcl-live (check set, held out whole, 2 queries" in check.stdout, check.stderr
    assert "whose arguments the set labels" in check.stdout
    bfcl = next(r for r in reports if r["set"] == "bfcl-live")["offlinePlanner"]
    assert 0 < bfcl["labelled"] <= 6 and 0 <= bfcl["rightArguments"] <= bfcl["rightLabelled"] <= bfcl["right"]
    assert all("labelled" not in r["offlinePlanner"] for r in reports if r["set"] != "bfcl-live")


def test_a_right_plan_counts_as_the_sets_answer_only_with_the_arguments_it_labels(tmp_path: Path) -> None:
    echo = {
        "name": "echo_text",
        "description": "Echo a text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
    queries = [
        {"query": 'echo the text "Hello, World"', "tools": ["demo/echo_text"], "arguments": {"text": ["hello world"]}},
        {"query": 'echo the text "goodbye"', "tools": ["demo/echo_text"], "arguments": {"text": ["hello world"]}},
        {"query": 'echo the text "unlabelled"', "tools": ["demo/echo_text"]},
    ]
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"check": True, "backends": [{"id": "demo", "tools": [echo]}], "queries": queries}))
    done = agentify_eval(str(path), "--mode", "public", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    planner = json.loads(done.stdout)[0]["offlinePlanner"]
    assert (planner["right"], planner["labelled"], planner["rightLabelled"], planner["rightArguments"]) == (3, 2, 2, 1)
    path.write_text(
        json.dumps({"backends": [{"id": "demo", "tools": [echo]}], "queries": [{**queries[0], "arguments": []}]})
    )
    refused = agentify_eval(str(path), "--mode", "public", cwd=tmp_path)
    assert refused.returncode != 0 and "not a public set" in refused.stderr and "arguments" in refused.stderr


def test_a_plan_matches_the_sets_arguments_as_bfcls_checker_reads_them() -> None:
    from agentify.eval.arguments import matches

    accepted = {"loc": ["2020 Addison Street, Berkeley, CA, USA"], "time": [600], "unit": ["", "celsius"]}
    assert matches({"loc": "2020 addison street berkeley ca usa", "time": 600.0}, accepted)
    assert matches({"loc": "2020 Addison Street, Berkeley, CA, USA", "time": "600", "unit": "Celsius"}, accepted)
    assert not matches({"loc": "2020 Addison Street", "time": 600}, accepted)  # another value
    assert not matches({"loc": "2020 Addison Street, Berkeley, CA, USA"}, accepted)  # `time` may not be left out
    assert not matches({"loc": "2020 Addison Street, Berkeley, CA, USA", "time": 600, "speed": 1}, accepted)
    nested = {"prefs": [{"sweetness": ["none"], "temperature": ["", "hot"]}], "tags": [["a", "b"]]}
    assert matches({"prefs": {"sweetness": "None"}, "tags": ["a", "b"]}, nested)
    assert not matches({"prefs": {"sweetness": "sweet"}, "tags": ["a", "b"]}, nested)
    assert not matches({"prefs": {"sweetness": "none"}, "tags": ["b", "a"]}, nested)
    assert matches({"on": True}, {"on": [True]}) and not matches({"on": 1}, {"on": [True]})
    assert matches({"on": "true"}, {"on": [True]}) and matches({"on": True}, {"on": ["True"]})
    assert matches({"unit": "", "loc": "x", "time": 600}, {**accepted, "loc": ["x"]})  # "" where "" is accepted
    assert not matches({"unit": "", "loc": "x"}, {"loc": ["x"], "unit": ["celsius"]})
    bfcl = load_public("bfcl-live").queries
    assert 1000 < sum(q.arguments is not None for q in bfcl) < len(bfcl)  # where the kept tool takes those arguments


def test_a_check_set_has_no_tuning_part(tmp_path: Path) -> None:
    tool = {"name": "get_forecast", "description": "Weather forecast", "inputSchema": {"type": "object"}}
    data = {
        "backends": [{"id": "weather", "tools": [tool]}],
        "queries": [
            {"query": q, "tools": ["weather/get_forecast"]}
            for q in ("rain in Oslo?", "wind in Rome?", "snow in Bern?", "sun in Nice?", "fog in Pisa?")
        ],
    }
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data))
    split = load_public(str(path))
    assert not split.check and split.select("tune") and split.select("heldout")
    path.write_text(json.dumps({**data, "check": True}))
    check = load_public(str(path))
    assert check.check and check.select("tune") == [] and len(check.select("heldout")) == 5


def test_a_plan_that_would_ask_for_its_arguments_counts_apart_right_or_wrong_by_its_tool(tmp_path: Path) -> None:
    def tool(name: str, description: str, *required: str) -> dict[str, Any]:
        properties = {n: {"type": "string", "description": f"The {n}"} for n in required}
        schema = {"type": "object", "properties": properties, "required": list(required)}
        return {"name": name, "description": description, "inputSchema": schema}

    tools = [
        tool("get_forecast", "Get the weather forecast of a city", "city"),
        tool("stock_quote", "Get the latest stock quote of a ticker symbol", "symbol"),
        tool("list_holidays", "List the public holidays of this year"),
    ]
    queries = [
        ("what's the weather forecast?", "get_forecast"),  # asks for the city: right by its tool
        ("get the latest stock quote", "get_forecast"),  # asks for the symbol of another tool: wrong
        ("list the public holidays of this year", "list_holidays"),  # a plan
        ("hello there", "list_holidays"),  # nothing fits: refused
    ]
    data = {
        "check": True,
        "backends": [{"id": "web", "tools": tools}],
        "queries": [{"query": q, "tools": [f"web/{t}"]} for q, t in queries],
    }
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data))
    done = agentify_eval(str(path), "--mode", "public", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)
    counts = {"right": 1, "wrong": 0, "refused": 1, "total": 4, "askedRight": 1, "askedWrong": 1}
    assert report["offlinePlanner"] == counts  # a plan that only asks is not a right (or wrong) complete plan
    text = agentify_eval(str(path), "--mode", "public", cwd=tmp_path).stdout
    assert "complete plans right 25.0%, wrong 0.0%; refused 25.0%" in text
    assert (
        "plans that ask the user for arguments: right 25.0%, wrong 25.0% (with them: right 50.0%, wrong 25.0%)" in text
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot be read"), ('{"backends": []}', "not a public set"), ('{"backends": [], "queries": []}', "needs")],
)
def test_a_file_that_is_no_public_set_is_a_usage_error(tmp_path: Path, content: str | None, said: str) -> None:
    path = tmp_path / "set.json"
    if content is not None:
        path.write_text(content)
    done: subprocess.CompletedProcess[str] = agentify_eval(str(path), "--mode", "public", cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
