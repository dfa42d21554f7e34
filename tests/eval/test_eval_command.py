"""`agentify eval` as a user runs it: the config's real backends are started, tasks only planned."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, REPO, fs_backend, write_config

pytestmark = pytest.mark.integration


def agentify_eval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    return subprocess.run(
        [str(AGENTIFY), "eval", *args],
        env=env | {"PYTHONPATH": str(REPO)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def cases_file(tmp_path: Path) -> Path:
    listing = "list_directory|list_directory_with_sizes"
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("read notes.txt", "read_text_file", {"path": "notes.txt"}),
        ("list the files in docs", listing, {"path": "docs"}),
        ("change milk to bread in notes.txt", "edit_file", {}),  # an edit in plain words: refused offline
    ]
    context = {"currentWorkingDirectory": "workspace"}
    lines = [
        {"query": query, "context": context, "expect": {"backend": "fs", "tool": tool, "arguments": arguments}}
        for query, tool, arguments in cases
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_eval_plans_on_the_real_backend_and_prints_one_json_object(tmp_path: Path, workspace: Path) -> None:
    marker = workspace / "notes.txt"
    before = marker.read_text()
    config = write_config(tmp_path, [fs_backend(workspace)])
    cases = str(cases_file(tmp_path))
    done = agentify_eval(cases, "--config", str(config), "--planner", "offline", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"accuracy", "shortlistRecall", "shortlistK", "meanPromptTokens", "results"} <= report.keys()
    assert report["accuracy"] == pytest.approx(2 / 3) and report["shortlistRecall"] == 1
    assert report["catalogTools"] == 14 and report["unavailableBackends"] == []
    assert [r["verdict"] for r in report["results"]] == ["ok", "ok", "refused"]
    assert marker.read_text() == before  # planned, never executed


def test_extra_tools_join_the_catalog_and_the_text_report_gives_the_figures(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)], planner={"provider": "offline"})
    extra = REPO / "examples" / "eval" / "generated-tools.json"
    done = agentify_eval(str(cases_file(tmp_path)), "--config", str(config), "--extra-tools", str(extra), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "catalog: 620 tools (fs 14, github 15" in done.stdout
    assert "top-1 accuracy: 2/3 = 66.7% (1 refused, 0 wrong)" in done.stdout
    assert "shortlist recall at 24: 3/3 = 100.0%" in done.stdout
    assert "with all 620 tools" in done.stdout


def test_a_bad_file_exits_2_and_an_unusable_planner_exits_1(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "x"}\n')
    done = agentify_eval(str(bad), "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "bad.jsonl:1" in done.stderr
    done = agentify_eval(str(cases_file(tmp_path)), "--config", str(config), "--planner", "sampling", cwd=tmp_path)
    assert done.returncode == 1 and "does not offer MCP sampling" in done.stderr
