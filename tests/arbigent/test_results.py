"""Reading `arbigent run` output and result.yml, output truncation, and the report."""

from __future__ import annotations

import time
from pathlib import Path

from agentify.arbigent.results import (
    OutputCapture,
    RunReport,
    RunStatus,
    ScenarioResult,
    StdoutObserver,
    fresh_file,
    merge_results,
    read_result_yml,
)

STDOUT = """\
12:00:01 I: [Execution Plan] Selected scenarios for execution: [checkout, settings-dark-mode]
12:00:01 I:
12:00:01 I: 📁 Results will be saved to:
12:00:01 I:   • YAML Results: /w/arbigent-result/result.yml
12:00:01 I:   • HTML Report: /w/arbigent-result/report.html
12:00:02 I: ⏺ checkout scenario has been started
12:00:02 I: 🔄 Running: checkout - task: 1/3
12:00:03 E: 🔴 checkout scenario failed
12:00:04 I: ⏺ settings-dark-mode scenario has been started
12:00:05 I:
12:00:05 I: 📋 Final Results:
12:00:05 I: 🔴 checkout: Failed
12:00:05 I: 🟢 settings-dark-mode: Success
12:00:05 I:
12:00:05 I: 🔴 Some scenarios failed: [checkout, settings-dark-mode]
"""


def observe(text: str) -> StdoutObserver:
    observer = StdoutObserver()
    for line in text.splitlines():
        observer.feed(line)
    return observer


def test_the_observer_reads_plan_position_final_results_and_paths() -> None:
    observer = StdoutObserver()
    lines = STDOUT.splitlines()
    for line in lines[:6]:
        observer.feed(line)
    assert observer.position() == "scenario 1 of 2"
    for line in lines[6:]:
        observer.feed(line)
    assert observer.selected == ["checkout", "settings-dark-mode"]
    assert observer.position() == "scenario 2 of 2"
    assert observer.final == [ScenarioResult("checkout", False), ScenarioResult("settings-dark-mode", True)]
    assert observer.result_file == "/w/arbigent-result/result.yml"
    assert observer.report_file == "/w/arbigent-result/report.html"


def test_an_empty_plan_is_an_empty_selection() -> None:
    assert observe("12:00:01 I: [Execution Plan] Selected scenarios for execution: []\n").selected == []


def test_result_yml_gives_per_scenario_success(tmp_path: Path) -> None:
    path = tmp_path / "result.yml"
    path.write_text("scenarios:\n- id: a\n  isSuccess: true\n  histories: []\n- id: b\n  isSuccess: false\n")
    assert read_result_yml(path) == [ScenarioResult("a", True), ScenarioResult("b", False)]


def test_unreadable_result_yml_gives_nothing(tmp_path: Path) -> None:
    path = tmp_path / "result.yml"
    path.write_text("scenarios: [unclosed\n")
    assert read_result_yml(path) == []


def test_stdout_results_win_and_result_yml_fills_in() -> None:
    final = [ScenarioResult("a", True)]
    from_file = [ScenarioResult("a", False), ScenarioResult("b", False)]
    assert merge_results(final, from_file) == [ScenarioResult("a", True), ScenarioResult("b", False)]


def test_a_result_file_from_an_earlier_run_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "result.yml"
    path.write_text("old")
    assert fresh_file(path, time.time_ns() + 10**9) is None
    assert fresh_file(path, time.time_ns() - 10**9) == path


def test_output_within_the_limit_is_kept_whole() -> None:
    capture = OutputCapture(100)
    capture.write("hello\n")
    capture.write("world\n")
    assert capture.render() == "hello\nworld\n"
    assert capture.cut == 0


def test_big_output_keeps_head_and_tail_and_states_the_cut() -> None:
    capture = OutputCapture(100)
    for i in range(1000):
        capture.write(f"line {i:04d}\n")
    text = capture.render()
    assert text.startswith("line 0000\n")
    assert text.endswith("line 0999\n")
    assert capture.cut == 10_000 - 100
    assert "[... 9900 characters cut from the middle of this output ...]" in text


def report(status: RunStatus, **overrides: object) -> RunReport:
    values: dict[str, object] = {
        "selection": "tag 'login'",
        "status": status,
        "exit_code": 0,
        "scenarios": (),
        "result_file": None,
        "report_file": None,
        "duration_ms": 1234,
        "command": "arbigent run --tags=login",
        "working_directory": "/w",
        "stdout": OutputCapture(1000),
        "stderr": OutputCapture(1000),
        "timeout_seconds": 1800.0,
    }
    values.update(overrides)
    return RunReport(**values)  # type: ignore[arg-type]


def test_structured_content_has_the_documented_shape() -> None:
    passed = report(
        RunStatus.PASSED, scenarios=(ScenarioResult("login", True),), result_file="/w/r.yml", report_file="/w/r.html"
    )
    assert passed.structured() == {
        "status": "passed",
        "exitCode": 0,
        "scenarios": [{"id": "login", "success": True}],
        "resultFile": "/w/r.yml",
        "reportFile": "/w/r.html",
        "durationMs": 1234,
    }
    assert not passed.is_error


def test_the_text_starts_with_a_verdict_naming_the_failed_scenario() -> None:
    failed = report(RunStatus.FAILED, exit_code=1, scenarios=(ScenarioResult("checkout", False),))
    assert failed.is_error
    assert (
        failed.text().splitlines()[0]
        == "FAILED: 1 of 1 scenario(s) failed: checkout (tag 'login', exit code 1, 1.2 s)."
    )
    assert "Exit code: 1" in failed.text()


def test_an_empty_selection_says_the_tag_matched_nothing() -> None:
    empty = report(RunStatus.EMPTY)
    assert empty.is_error
    assert empty.verdict().startswith("FAILED: tag 'login' matched no scenario")


def test_a_failure_before_any_result_quotes_the_cli_error() -> None:
    stderr = OutputCapture(1000)
    stderr.write("Usage: arbigent run [<options>]\n\nError: no such option --config\n")
    failed = report(RunStatus.FAILED, exit_code=1, stderr=stderr)
    assert failed.verdict().endswith(": Error: no such option --config")
