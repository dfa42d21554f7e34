"""The eval's pieces in process: reading the labelled file, judging a plan, the report's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentify.eval.routing import Case, EvalFileError, _present, evaluate, load_cases
from agentify.planner.offline import OfflinePlanner
from agentify.planner.retrieval import ToolIndex
from tests.planner.support import example_catalog


def write_cases(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_context_paths_resolve_against_the_eval_working_directory(tmp_path: Path) -> None:
    path = write_cases(
        tmp_path,
        {
            "query": "read it",
            "context": {"currentWorkingDirectory": "ws", "activeDocumentURI": "ws/a.txt"},
            "expect": {"backend": "fs", "tool": "read_text_file|read_file"},
        },  # fmt: skip
        "",
        {"query": "list", "expect": {"backend": "fs", "tool": "list_directory", "arguments": {"path": "."}}},
    )
    first, second = load_cases(path, str(tmp_path))
    assert first.task.context is not None and second.task.context is not None
    assert first.task.context.current_working_directory == str(tmp_path / "ws")
    assert first.task.context.active_document_uri == (tmp_path / "ws" / "a.txt").as_uri()
    assert first.tools == ("read_text_file", "read_file") and (first.line, second.line) == (1, 3)
    assert second.task.context.current_working_directory == str(tmp_path)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ({"query": "x"}, '"expect"'),
        ({"query": "", "expect": {"backend": "a", "tool": "b"}}, "query"),
        ({"query": "x", "expect": {"backend": "a", "tool": "b", "arguments": [1]}}, "must be an object"),
    ],
)
def test_a_bad_line_is_reported_with_its_number(tmp_path: Path, line: object, problem: str) -> None:
    path = write_cases(tmp_path, {"query": "ok", "expect": {"backend": "a", "tool": "b"}}, line)
    with pytest.raises(EvalFileError) as caught:
        load_cases(path, str(tmp_path))
    assert f"{path}:2" in str(caught.value) and problem in str(caught.value)


def test_expected_values_are_present_when_paths_resolve_lists_match_in_any_order_and_types_agree() -> None:
    cwd = "/work/ws"
    assert _present({"path": "notes.txt"}, {"path": "/work/ws/notes.txt", "head": 5}, cwd)
    assert _present({"path": "."}, {"path": "/work/ws"}, cwd)
    assert not _present({"path": "notes.txt"}, {"path": "/elsewhere/notes.txt"}, cwd)
    assert _present({"ids": ["b", "a"]}, {"ids": ["a", "b"]}, cwd)
    assert not _present({"ids": ["a"]}, {"ids": ["a", "b"]}, cwd)
    assert _present({"width": 1280}, {"width": 1280.0}, cwd)
    assert not _present({"static": False}, {"static": 0}, cwd)
    assert not _present({"head": 5}, {"path": "/work/ws/x"}, cwd)


@pytest.mark.anyio
async def test_the_report_has_the_contract_keys_and_counts_each_case(tmp_path: Path) -> None:
    path = write_cases(
        tmp_path,
        {"query": "run the login tests", "expect": {"backend": "arbigent", "tool": "run-arbigent-test-login"}},
        {"query": "run the login tests", "expect": {"backend": "arbigent", "tool": "run-arbigent-test-all"}},
        {"query": "click the Sign in button", "expect": {"backend": "browser", "tool": "browser_click"}},
        {
            "query": "open localhost:3000",
            "expect": {"backend": "browser", "tool": "browser_navigate", "arguments": {"url": "http://localhost:3000"}},
        },  # fmt: skip
    )
    cases: list[Case] = load_cases(path, str(tmp_path))
    report = await evaluate(OfflinePlanner(), ToolIndex(example_catalog(generated=True)), cases, 24)
    data = report.as_json()
    assert {"accuracy", "shortlistRecall", "shortlistK", "meanPromptTokens", "results"} <= data.keys()
    assert (data["accuracy"], data["shortlistRecall"], data["shortlistK"], data["meanPromptTokens"]) == (0.5, 1, 24, 0)
    assert [r["verdict"] for r in data["results"]] == ["ok", "wrong", "refused", "ok"]
    assert data["results"][2]["error"]["code"] == "no_plan"
    assert data["catalogTools"] == 653
    tokens = data["estimatedPromptTokens"]
    assert 0 < tokens["shortlist"] < tokens["allTools"] / 2
    text = "\n".join(report.lines())
    assert "top-1 accuracy: 2/4 = 50.0% (1 refused, 1 wrong)" in text and "shortlist recall at 24: 4/4" in text
