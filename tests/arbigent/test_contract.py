"""Contract: every flag the runner can emit is an option the real `arbigent run` / `run task` 0.77.0 has.

The lists below are copied from docs/arbigent-cli-facts.md ("Options of `run`", "Corrections and
additions") and arbigent-cli/src/main/kotlin (RunCommand.kt, RunTaskCommand.kt, CommonOptions.kt,
AiConfig.kt) at tag 0.77.0. They are written out here on purpose, apart from `options.py`, so a
change on either side shows up as a failing test.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agentify.arbigent.runs import RunnerConfig, Runs, Selection, Task
from agentify.arbigent.settings import load_settings
from agentify.security.redact import Redactor

from .support import FAKE_ARBIGENT, PROJECT_YAML

AI_OPTIONS = {
    "--ai-type",
    "--openai-endpoint",
    "--openai-model-name",
    "--openai-api-key",
    "--gemini-endpoint",
    "--gemini-model-name",
    "--gemini-api-key",
    "--azure-openai-endpoint",
    "--azure-openai-api-version",
    "--azure-openai-model-name",
    "--azure-openai-api-key",
}
DEVICE_OPTIONS = {
    "--ai-api-logging",
    "--os",
    "--ios-xctest-apple-team-id",
    "--ios-real-device-id",
    "--ios-real-device-port",
    "--log-level",
    "--log-file",
    "--working-directory",
}
REAL_RUN_OPTIONS = (
    AI_OPTIONS
    | DEVICE_OPTIONS
    | {
        "--project-file",
        "--path",
        "--variables",
        "--scenario-ids",
        "--tags",
        "--dry-run",
        "--shard",
    }
)
REAL_TASK_OPTIONS = AI_OPTIONS | DEVICE_OPTIONS | {"--max-step", "--max-retry"}

EVERY_KEY = """\
ai-type: OpenAI
openai-endpoint: https://api.example/v1/
openai-model-name: gpt-4.1
openai-key: sk-alias-0000
gemini-endpoint: https://gemini.example/
gemini-model-name: gemini-x
gemini-api-key: g-key-0000
azure-openai-endpoint: https://azure.example/
azure-openai-api-version: 2024-10-21
azure-openai-model-name: gpt-az
azure-openai-key: az-key-0000
ai-api-logging: true
os: Android
ios-xctest-apple-team-id: TEAM123456
ios-real-device-id: 00008110-000
ios-real-device-port: 22087
log-level: DEBUG
log-file: arbigent-result/arbigent.log
working-directory: /elsewhere
project-file: other.yaml
path: /tmp/app.apk
variables: {user_name: "Ada, Lovelace", quote: 'say "hi"'}
scenario-ids: a
tags: smoke
dry-run: true
shard: 1/2
max-step: 12
max-retry: 2
include-app-ui-structure: true
some-future-key: x
run:
  os: ios
  max-step: 99
  task:
    os: web
    max-step: 7
    variables: {a: b}
instruction:
  scenario-ids: a
"""


def flag_names(argv: list[str]) -> set[str]:
    head = argv[: argv.index("--")] if "--" in argv else argv
    return {arg.split("=", 1)[0] for arg in head if arg.startswith("--")}


def runs_for(tmp_path: Path) -> Runs:
    config = tmp_path / "config.yaml"
    config.write_text(EVERY_KEY)
    settings = load_settings(config)
    project = tmp_path / "arbigent-project.yaml"
    project.write_text(PROJECT_YAML)
    binary = FAKE_ARBIGENT
    return Runs(
        RunnerConfig(binary=binary, project_file=project, working_directory=tmp_path, settings=settings),
        Redactor(),
        anyio.Event(),
    )


SELECTIONS = [Selection(), Selection(tag="login"), Selection(ids=("login", "checkout"))]
TASKS = [Selection(task=Task("check the login screen")), Selection(task=Task("-x @file", max_step=3, max_retry=0))]


@pytest.mark.parametrize("selection", SELECTIONS, ids=["all", "tag", "ids"])
def test_every_flag_of_a_scenario_run_is_a_real_run_option(tmp_path: Path, selection: Selection) -> None:
    argv = runs_for(tmp_path).argv(selection)
    assert argv[1] == "run" and argv[2].startswith("--")
    assert flag_names(argv[1:]) <= REAL_RUN_OPTIONS
    assert all(arg.startswith("--") for arg in argv[2:]), "always one --x=value argument, never a bare word"


@pytest.mark.parametrize("selection", TASKS, ids=["plain", "limits"])
def test_every_flag_of_a_task_run_is_a_real_run_task_option(tmp_path: Path, selection: Selection) -> None:
    argv = runs_for(tmp_path).argv(selection)
    assert argv[1:3] == ["run", "task"]
    assert flag_names(argv[3:]) <= REAL_TASK_OPTIONS
    assert argv[-2:] == ["--", selection.task.goal if selection.task else ""]


def test_api_keys_never_reach_the_command_line(tmp_path: Path) -> None:
    runs = runs_for(tmp_path)
    for selection in SELECTIONS + TASKS:
        argv = " ".join(runs.argv(selection))
        assert "key-0000" not in argv and "sk-alias" not in argv
        assert not flag_names(runs.argv(selection)) & {"--openai-api-key", "--gemini-api-key", "--azure-openai-api-key"}


def test_the_runner_decides_selection_and_place_itself(tmp_path: Path) -> None:
    argv = runs_for(tmp_path).argv(Selection(tag="login"))
    assert not flag_names(argv) & {"--scenario-ids", "--dry-run", "--shard", "--working-directory"}
    assert [a for a in argv if a.startswith("--tags")] == ["--tags=login"]


def test_the_fake_cli_knows_exactly_the_real_options() -> None:
    spec = importlib.util.spec_from_file_location("arbigent_fake", FAKE_ARBIGENT.parent / "arbigent_fake" / "main.py")
    assert spec is not None and spec.loader is not None
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    assert {f"--{name}" for name in fake.RUN_OPTIONS} == REAL_RUN_OPTIONS
    assert {f"--{name}" for name in fake.TASK_OPTIONS} == REAL_TASK_OPTIONS


@pytest.mark.integration
@pytest.mark.parametrize("selection", [*SELECTIONS[:2], *TASKS], ids=["all", "tag", "task", "task-limits"])
def test_the_strict_fake_accepts_everything_the_runner_emits(tmp_path: Path, selection: Selection) -> None:
    runs = runs_for(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | runs.env(selection)
    env["AGENTIFY_FAKE_PYTHON"] = sys.executable
    argv = runs.argv(selection)
    result = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Usage:" not in result.stderr
