"""Reading `arbigent run` output and result.yml, output truncation, screenshots, and the report."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from agentify.arbigent.artifacts import MAX_IMAGE_BYTES, ArtifactError, ArtifactStore, attachments, read_result_file
from agentify.arbigent.results import (
    OutputCapture,
    RunReport,
    RunStatus,
    ScenarioResult,
    StdoutObserver,
    fresh_file,
    merge_results,
)
from agentify.arbigent.schemas import RUN_OUTPUT

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
    assert read_result_file(path).scenarios == [ScenarioResult("a", True), ScenarioResult("b", False)]


def test_unreadable_result_yml_gives_nothing(tmp_path: Path) -> None:
    path = tmp_path / "result.yml"
    path.write_text("scenarios: [unclosed\n")
    assert read_result_file(path).scenarios == []


def result_with_steps(tmp_path: Path, *paths: str) -> Path:
    """A result.yml like Arbigent's: one failed scenario, two attempts, absolute screenshot paths."""
    steps = [f"      - stepId: s{i}\n        screenshotFilePath: {p}\n" for i, p in enumerate(paths)]
    half = len(steps) // 2
    attempt = "  - status: x\n    agentResults:\n    - goal: g\n      isGoalAchieved: false\n      steps:\n{}"
    text = "scenarios:\n- id: login\n  isSuccess: false\n  histories:\n"
    text += attempt.format("".join(steps[:half])) + attempt.format("".join(steps[half:]))
    (tmp_path / "result.yml").write_text(text)
    return tmp_path / "result.yml"


def test_the_last_screenshot_of_the_last_attempt_is_the_one_shown(tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    names = [str(shots / f"{n}.png") for n in ("a", "b", "c", "d")]
    result = read_result_file(result_with_steps(tmp_path, *names))
    assert result.last_screenshot == {"login": shots / "d.png"}
    assert result.screenshots == [Path(n) for n in names]


def test_screenshots_outside_the_result_directory_are_never_offered(tmp_path: Path) -> None:
    (tmp_path / "screenshots").mkdir()
    (tmp_path / "screenshots" / "link.png").symlink_to("/etc/passwd")
    paths = ["/etc/passwd", "../secret.png", str(tmp_path / "screenshots" / "link.png"), "screenshots/ok.png"]
    result = read_result_file(result_with_steps(tmp_path, *paths))
    assert result.screenshots == [tmp_path.resolve() / "screenshots" / "ok.png"]


def test_screenshots_are_attached_within_the_budget_and_the_rest_are_named(tmp_path: Path) -> None:
    small, big = tmp_path / "small.png", tmp_path / "big.png"
    small.write_bytes(b"\x89PNG" + b"x" * 100)
    big.write_bytes(b"\x89PNG" + b"x" * MAX_IMAGE_BYTES)
    store = ArtifactStore()
    try:
        run = store.keep("r1", "tag 'login', failed", None, None, [small, big])
        shown = attachments(run, [("a", small), ("b", big)])
    finally:
        store.close()
    assert shown[0].data == small.read_bytes() and shown[0].uri == "arbigent://runs/r1/screenshots/small.png"
    assert shown[1].data is None and "over the" in (shown[1].note or "")
    assert shown[1].uri == "arbigent://runs/r1/screenshots/big.png"


def test_the_store_keeps_copies_of_a_runs_files_and_serves_only_those(tmp_path: Path) -> None:
    result, report_html, shot = tmp_path / "result.yml", tmp_path / "report.html", tmp_path / "s1.png"
    result.write_text("scenarios: []\n")
    report_html.write_text("<html></html>")
    shot.write_bytes(b"png")
    store = ArtifactStore(keep=1)
    try:
        first = store.keep("r1", "x", result, report_html, [shot])
        result.write_text("overwritten by the next run\n")
        assert store.read(first.uri("result.yml")) == (b"scenarios: []\n", "application/yaml")
        assert store.read(first.uri("screenshots/s1.png")) == (b"png", "image/png")
        for uri in ("arbigent://runs/r1/../../etc/passwd", "arbigent://runs/r1/screenshots/other.png", "file:///x"):
            with pytest.raises(ArtifactError):
                store.read(uri)
        store.keep("r2", "y", result, None, [])
        with pytest.raises(ArtifactError, match="no such resource"):
            store.read(first.uri("result.yml"))
        assert [run.run_id for run in store.runs()] == ["r2"]
    finally:
        store.close()


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
    passed.stdout.write("x" * 300 + "the end\n")
    assert passed.structured() == {
        "status": "passed",
        "exitCode": 0,
        "scenarios": [{"id": "login", "success": True}],
        "resultFile": "/w/r.yml",
        "reportFile": "/w/r.html",
        "durationMs": 1234,
        "screenshots": [],
        "stdoutTail": "x" * 300 + "the end\n",
        "stderrTail": "",
    }  # no run was stored, so there is no runId: an unknown value is left out, never null
    assert not passed.is_error


def test_structured_content_fits_the_output_schema_which_has_no_type_arrays() -> None:
    killed = report(RunStatus.TIMEOUT, exit_code=None)  # no exit code, no result files, no stored run
    Draft202012Validator(RUN_OUTPUT).validate(killed.structured())
    assert set(killed.structured()) == set(RUN_OUTPUT["required"])

    def type_arrays(node: object) -> list[object]:
        if isinstance(node, dict):
            found = [node["type"]] if isinstance(node.get("type"), list) else []
            return found + [t for value in node.values() for t in type_arrays(value)]
        return [t for value in node for t in type_arrays(value)] if isinstance(node, list) else []

    assert type_arrays(RUN_OUTPUT) == []


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


def test_a_cli_error_without_the_error_prefix_after_jvm_warnings_is_the_reason() -> None:
    stderr = OutputCapture(1000)
    stderr.write("WARNING: A restricted method in java.lang.System has been called\n")
    stderr.write("Missing OpenAI API key. Please provide via --openai-api-key, OPENAI_API_KEY environment variable\n")
    failed = report(RunStatus.FAILED, exit_code=1, stderr=stderr)
    assert failed.verdict().endswith(
        ": Missing OpenAI API key. Please provide via --openai-api-key, OPENAI_API_KEY environment variable"
    )


def test_the_tail_of_a_cut_output_is_its_end() -> None:
    capture = OutputCapture(100)
    for i in range(1000):
        capture.write(f"line {i:04d}\n")
    assert capture.tail(20) == "line 0998\nline 0999\n"
    short = OutputCapture(100)
    short.write("abc")
    assert short.tail(4000) == "abc"


def test_a_task_verdict_says_whether_the_agent_achieved_the_goal() -> None:
    passed = report(
        RunStatus.PASSED, selection="the task 'open settings'", is_task=True, scenarios=(ScenarioResult("task", True),)
    )
    failed = report(
        RunStatus.FAILED,
        selection="the task 'open settings'",
        is_task=True,
        exit_code=1,
        scenarios=(ScenarioResult("task", False),),
    )
    assert passed.verdict() == "PASSED: the AI agent achieved the task 'open settings' (1.2 s)."
    assert failed.verdict() == "FAILED: the AI agent did not achieve the task 'open settings' (exit code 1, 1.2 s)."
