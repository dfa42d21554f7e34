"""The fake `arbigent` behaves like the real CLI where the runner can tell (docs/arbigent-cli-facts.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .support import FAKE_ARBIGENT, PROJECT_YAML

pytestmark = pytest.mark.integration

LINE = re.compile(r"^\d\d:\d\d:\d\d [DIWE]: ")


def arbigent(
    cwd: Path, *args: str, key: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment |= {"AGENTIFY_FAKE_PYTHON": sys.executable, **(env or {})}
    if key:
        environment["OPENAI_API_KEY"] = "test-key"
    return subprocess.run(
        [str(FAKE_ARBIGENT), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    (tmp_path / "arbigent-project.yaml").write_text(PROJECT_YAML)
    return tmp_path


def selected(stdout: str) -> str:
    match = re.search(r"Selected scenarios for execution: (\[.*\])", stdout)
    assert match is not None, stdout
    return match.group(1)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ((), "[checkout, settings-dark-mode]"),
        (("--tags=smoke",), "[login]"),
        (("--tags", "login,settings"), "[login, settings-dark-mode]"),
        (("--tags=nope",), "[]"),
        (("--scenario-ids=settings-dark-mode,login",), "[login, settings-dark-mode]"),
    ],
)
def test_the_fake_selects_like_the_real_cli(project_dir: Path, filters: tuple[str, ...], expected: str) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", *filters)
    assert result.returncode == 0, result.stderr
    assert selected(result.stdout) == expected


def test_every_stdout_line_has_the_cli_format_and_ends_with_final_results(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file", "arbigent-project.yaml", "--tags=purchase")
    lines = result.stdout.splitlines()
    assert all(LINE.match(line) for line in lines)
    assert any(line.endswith("I: 📋 Final Results:") for line in lines)
    assert any(line.endswith("I: 🟢 checkout: Success") for line in lines)
    assert any(line.endswith("I: 🟢 All scenarios completed successfully: [checkout]") for line in lines)


def test_an_unknown_option_is_a_usage_error(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project", "arbigent-project.yaml", "--config", "c.yaml")
    assert result.returncode == 1
    assert "Error: no such option --project" in result.stderr
    assert result.stdout == ""


def test_tags_with_scenario_ids_is_an_error(project_dir: Path) -> None:
    result = arbigent(
        project_dir, "run", "--project-file=arbigent-project.yaml", "--tags=smoke", "--scenario-ids=login"
    )
    assert result.returncode == 1
    assert "Cannot specify both scenario IDs and tags" in result.stderr


def test_a_missing_api_key_is_an_error_printed_without_the_usage_error_prefix(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", key=False)
    assert result.returncode == 1
    assert result.stderr.startswith("Missing OpenAI API key. Please provide via --openai-api-key, OPENAI_API_KEY")


def test_help_lists_the_run_command(project_dir: Path) -> None:
    result = arbigent(project_dir, "--help")
    assert result.returncode == 0
    assert re.search(r"^\s+run\s", result.stdout, re.MULTILINE)


def test_a_failing_scenario_fails_the_run_and_result_yml_says_so(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", env={"FAKE_ARBIGENT_FAIL": "login"})
    assert result.returncode == 1
    assert "I: 🔴 checkout: Failed" in result.stdout
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    assert {s["id"]: s["isSuccess"] for s in data["scenarios"]} == {"checkout": False, "settings-dark-mode": True}
    assert (project_dir / "arbigent-result" / "report.html").exists()


def test_a_settings_file_in_the_cwd_adds_options(project_dir: Path) -> None:
    (project_dir / ".arbigent").mkdir()
    (project_dir / ".arbigent" / "settings.local.yml").write_text("run:\n  tags: settings\n")
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml")
    assert selected(result.stdout) == "[settings-dark-mode]"


def test_an_argument_file_is_expanded(project_dir: Path) -> None:
    (project_dir / "args").write_text("# options\n--project-file arbigent-project.yaml --tags=smoke\n")
    result = arbigent(project_dir, "run", "@args")
    assert selected(result.stdout) == "[login]"


def test_sigterm_writes_results_and_exits_143(project_dir: Path) -> None:
    environment = {
        **os.environ,
        "AGENTIFY_FAKE_PYTHON": sys.executable,
        "OPENAI_API_KEY": "k",
        "FAKE_ARBIGENT_HANG": "1",
    }
    with subprocess.Popen(
        [str(FAKE_ARBIGENT), "run", "--project-file=arbigent-project.yaml"],
        cwd=project_dir,
        env=environment,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if "scenario has been started" in line:
                break
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 143
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    assert [s["id"] for s in data["scenarios"]] == ["checkout", "settings-dark-mode"]


def settings(project_dir: Path, name: str, text: str) -> None:
    (project_dir / ".arbigent").mkdir(exist_ok=True)
    (project_dir / ".arbigent" / name).write_text(text)


def test_all_four_settings_files_are_chained_in_the_clis_order(project_dir: Path) -> None:
    settings(project_dir, "settings.yml", "run:\n  tags: settings\n")
    settings(project_dir, "settings.local.yml", "os: android\n")
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml")
    assert selected(result.stdout) == "[settings-dark-mode]", "a lower file still supplies a key the higher one omits"
    settings(project_dir, "settings.local.yaml", "tags: smoke\n")
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml")
    assert selected(result.stdout) == "[login]", "a higher file's global key beats a lower file's run key"


def test_a_settings_key_of_the_task_command_is_scoped_under_run_task(project_dir: Path) -> None:
    settings(project_dir, "settings.local.yml", "run:\n  log-level: warn\n  task:\n    log-level: info\n")
    task = arbigent(project_dir, "run", "task", "open settings")
    run = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml")
    assert "All scenarios completed successfully" in task.stdout
    assert "Final Results" not in run.stdout, "warn hides the I: lines of `run`"


@pytest.mark.parametrize("source", ["flag", "settings"])
def test_a_choice_in_the_wrong_case_is_a_usage_error(project_dir: Path, source: str) -> None:
    if source == "settings":
        settings(project_dir, "settings.yml", "os: Android\n")
    extra = ["--os=Android"] if source == "flag" else []
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", *extra)
    assert result.returncode == 1
    assert result.stderr == (
        "Usage: arbigent run [<options>] <command> [<args>]...\n\n"
        "Error: invalid value for --os: invalid choice: Android. (choose from android, ios, web)\n"
    )


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ("user_name=Ada, Lovelace", "Invalid variable format: ' Lovelace'. Expected 'key=value'"),
        ('a="unclosed', "Unmatched quote in value for key 'a'"),
        ("user-name=ada", "Invalid variable name: 'user-name'."),
    ],
)
def test_bad_variables_are_refused_as_the_variable_parser_refuses_them(
    project_dir: Path, variables: str, message: str
) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", f"--variables={variables}")
    assert result.returncode == 1
    assert f"Error: invalid value for --variables: {message}" in result.stderr


def test_an_alias_is_a_flag_but_not_a_settings_key(project_dir: Path) -> None:
    by_flag = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--openai-key=k", key=False)
    assert by_flag.returncode == 0, by_flag.stderr
    settings(project_dir, "settings.yml", "openai-key: k\n")
    by_key = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", key=False)
    assert by_key.stderr.startswith("Missing OpenAI API key")


def test_an_option_of_another_command_is_unknown(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "task", "--project-file=arbigent-project.yaml", "open settings")
    assert result.stderr == "Usage: arbigent run task [<options>] <goal>\n\nError: no such option --project-file\n"


def test_run_task_runs_one_scenario_called_task_without_a_plan_or_final_results(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "task", "--max-step=3", "--", "--check the @settings screen")
    assert result.returncode == 0, result.stderr
    assert all(LINE.match(line) for line in result.stdout.splitlines())
    assert "Execution Plan" not in result.stdout and "Final Results" not in result.stdout
    assert result.stdout.splitlines()[-7].endswith("I: All scenarios completed successfully")
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    assert [(s["id"], s["goal"], s["isSuccess"]) for s in data["scenarios"]] == [
        ("task", "--check the @settings screen", True)
    ]
    failed = arbigent(project_dir, "run", "task", "open settings", env={"FAKE_ARBIGENT_FAIL": "task"})
    assert failed.returncode == 1 and "I: Some scenarios failed" in failed.stdout


def test_result_yml_lists_every_steps_screenshot_and_the_files_exist(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--tags=purchase")
    assert result.returncode == 0
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    [scenario] = data["scenarios"]
    steps = [step for h in scenario["histories"] for a in h["agentResults"] for step in a["steps"]]
    assert len(steps) == 6, "checkout runs after launch-app and login: 3 tasks of 2 steps"
    for step in steps:
        path = Path(step["screenshotFilePath"])
        assert path.is_absolute() and path.parent == project_dir / "arbigent-result" / "screenshots"
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_dry_run_echoes_the_plan_and_writes_no_results(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--dry-run")
    assert result.returncode == 0
    assert result.stdout.endswith("Dry run mode is enabled. Exiting without executing scenarios.\n")
    assert not (project_dir / "arbigent-result" / "result.yml").exists()


def test_on_jdk_23_without_the_console_option_there_are_no_log_lines_after_the_plan(project_dir: Path) -> None:
    tui = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", env={"FAKE_ARBIGENT_JDK": "23"})
    lines = arbigent(
        project_dir,
        "run",
        "--project-file=arbigent-project.yaml",
        env={"FAKE_ARBIGENT_JDK": "23", "JAVA_OPTS": "-Xmx1g -Djdk.console=java.base"},
    )
    assert "Final Results" not in tui.stdout
    timestamped = [line for line in tui.stdout.splitlines() if LINE.match(line)]
    assert "[Execution Plan]" in timestamped[0]
    assert all("[Execution Plan]" in line or "Selected device" in line for line in timestamped)
    assert "I: 📋 Final Results:" in lines.stdout


def test_a_double_dash_ends_options_and_argument_files(project_dir: Path) -> None:
    (project_dir / "args").write_text("--max-step=1\n")
    result = arbigent(project_dir, "run", "task", "--", "@args")
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    assert result.returncode == 0 and data["scenarios"][0]["goal"] == "@args"


def test_a_current_cli_refuses_device_id_before_task_and_the_old_key_even_in_a_dry_run(project_dir: Path) -> None:
    before_task = arbigent(project_dir, "run", "--device-id=emulator-5554", "task", "open settings")
    settings(project_dir, "settings.yml", "run:\n  ios-real-device-id: 00008110-AAAA\n")
    dry_run = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--dry-run")
    assert before_task.returncode == 1
    assert (
        before_task.stderr == '--device-id must be passed after `task`, as in `run task --device-id <id> "<goal>"`.\n'
    )
    assert dry_run.returncode == 1 and dry_run.stderr.startswith("--ios-real-device-id (settings key")


def test_0_77_has_neither_device_id_nor_sort_and_takes_the_first_android_device(project_dir: Path) -> None:
    old = {"FAKE_ARBIGENT_VERSION": "0.77.0", "FAKE_ARBIGENT_DEVICES": "emulator-5554,emulator-5556"}
    device = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--device-id=x", env=old)
    sort = arbigent(project_dir, "sort", "--project-file=arbigent-project.yaml", "--diff", env=old)
    run = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", "--tags=login", env=old)
    assert "Error: no such option --device-id" in device.stderr
    assert "Error: no such subcommand sort" in sort.stderr
    assert run.returncode == 0, run.stderr
    data = yaml.safe_load((project_dir / "arbigent-result" / "result.yml").read_text())
    assert data["scenarios"][0]["histories"][0]["agentResults"][0]["deviceName"] == "emulator-5554"


def test_sort_without_diff_rewrites_the_file_which_the_runner_never_asks_for(project_dir: Path) -> None:
    project = project_dir / "arbigent-project.yaml"
    project.write_text('scenarios:\n- id: "b"\n  goal: "B"\n  dependency: "a"\n- id: "a"\n  goal: "A"\n')
    check = arbigent(project_dir, "sort", "--project-file=arbigent-project.yaml", "--diff")
    assert check.returncode == 1 and check.stdout.endswith("Run `arbigent sort` to apply.\n")
    assert arbigent(project_dir, "sort", "--project-file=arbigent-project.yaml").returncode == 0
    assert [s["id"] for s in yaml.safe_load(project.read_text())["scenarios"]] == ["a", "b"]
    assert arbigent(project_dir, "sort", "--project-file=arbigent-project.yaml", "--diff").stdout.startswith(
        "Already sorted"
    )
