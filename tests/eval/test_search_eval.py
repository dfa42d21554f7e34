"""`agentify eval --mode search`: recall at k of search_tools, and what an answer costs against every schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentify.eval.routing import load_cases
from agentify.eval.search import evaluate_search
from agentify.planner.retrieval import ToolIndex
from tests.conftest import REPO, fs_backend, write_config
from tests.eval.test_eval_command import agentify_eval, cases_file
from tests.planner.support import example_catalog

FRESH = REPO / "examples" / "eval" / "routing-fresh.jsonl"


def test_search_finds_the_right_tool_in_the_first_five_of_653_for_a_sliver_of_the_schemas() -> None:
    catalog = example_catalog(generated=True)
    assert len(catalog) >= 600
    report = evaluate_search(ToolIndex(catalog), load_cases(FRESH, str(REPO)), 5)
    assert report.recall(5) >= 0.95, "\n".join(report.lines())
    assert report.recall(1) <= report.recall(3) <= report.recall(5)
    assert report.mean_answer_tokens < 0.05 * report.catalog_tokens
    assert all(1 <= len(r.found) <= 5 for r in report.results)  # only tools that match a word


@pytest.mark.integration
def test_eval_mode_search_on_the_configured_backends_prints_recall(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)])
    done = agentify_eval(str(cases_file(tmp_path)), "--config", str(config), "--mode", "search", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mode"] == "search" and report["k"] == 5 and report["catalogTools"] == 14
    assert report["recall"]["5"] == 1.0
    assert [r["rank"] for r in report["results"]][0] == 1  # "read notes.txt": read_text_file first
    text = agentify_eval(str(cases_file(tmp_path)), "--config", str(config), "--mode", "search", cwd=tmp_path)
    assert "recall at 5: 3/3 = 100.0%" in text.stdout and "a search answer of 5 tools" in text.stdout
    bad = agentify_eval(
        str(cases_file(tmp_path)), "--config", str(config), "--mode", "search", "--limit", "0", cwd=tmp_path
    )
    assert bad.returncode == 2 and "--limit" in bad.stderr
