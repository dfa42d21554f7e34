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


def test_a_missing_api_key_is_an_error(project_dir: Path) -> None:
    result = arbigent(project_dir, "run", "--project-file=arbigent-project.yaml", key=False)
    assert result.returncode == 1
    assert "Missing OpenAI API key" in result.stderr


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
