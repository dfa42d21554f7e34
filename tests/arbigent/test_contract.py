"""Contract: every flag the runner can emit is an option the real `arbigent run` / `run task` of that version has.

The lists below are copied from docs/arbigent-cli-facts.md ("Options of `run`", "Corrections and
additions", "Changes after 0.77.0") and arbigent-cli/src/main/kotlin (RunCommand.kt,
RunTaskCommand.kt, CommonOptions.kt, AiConfig.kt at tag 0.77.0; DeviceIdOption.kt, JevOptions.kt and
the Anthropic config of main after 0.81.1). They are written out here on purpose, apart from
`options.py` and the fake's `versions.py`, so a change on either side shows up as a failing test.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from agentify.arbigent.devices import DeviceChoiceError, device_flag
from agentify.arbigent.options import MAIN, V0_77, V0_81, CliOptions, table_for
from agentify.arbigent.runs import RunnerConfig, Runs, Selection, Task
from agentify.arbigent.settings import load_settings
from agentify.security.redact import Redactor

from .support import FAKE_ARBIGENT, NEWEST, PROJECT_YAML

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
NEW_OPTIONS = {"--device-id", "--anthropic-endpoint", "--anthropic-model-name", "--anthropic-api-key"}
NEW_OPTIONS |= {"--jev-api-key", "--jev-base-url", "--jev-model", "--jev-mode", "--jev-action-threshold"}
NEW_OPTIONS |= {"--jev-goal-threshold"}
REAL = {
    "0.77.0": (REAL_RUN_OPTIONS, REAL_TASK_OPTIONS),
    "0.81.1": (REAL_RUN_OPTIONS, REAL_TASK_OPTIONS),
    NEWEST: (
        REAL_RUN_OPTIONS - {"--ios-real-device-id"} | NEW_OPTIONS,
        REAL_TASK_OPTIONS - {"--ios-real-device-id"} | NEW_OPTIONS,
    ),
}
"""The options `--help` lists; the newest CLI still accepts `--ios-real-device-id`, hidden, only to refuse it."""
TABLES = {"0.77.0": V0_77, "0.81.1": V0_81, NEWEST: MAIN}

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
NEW_KEYS = """\
anthropic-endpoint: https://anthropic.example/
anthropic-model-name: claude-x
anthropic-api-key: an-key-0000
jev-api-key: jev-key-0000
jev-base-url: https://jev.example/
jev-mode: Shadow
jev-action-threshold: 0.9
jev-goal-threshold: 1
"""
DEVICE = "00008110-000"


def every_key(version: str) -> str:
    """Every key a user may write, in the spelling the version takes (the newest refuses `ios-real-device-id`)."""
    if TABLES[version] is not MAIN:
        return EVERY_KEY
    return NEW_KEYS + EVERY_KEY.replace("ios-real-device-id:", "device-id:").replace("os: web", "os: android")


def flag_names(argv: list[str]) -> set[str]:
    head = argv[: argv.index("--")] if "--" in argv else argv
    return {arg.split("=", 1)[0] for arg in head if arg.startswith("--")}


def runs_for(tmp_path: Path, version: str, device_id: str | None = None) -> Runs:
    config = tmp_path / "config.yaml"
    config.write_text(every_key(version))
    table = TABLES[version]
    settings = load_settings(config, table)
    project = tmp_path / "arbigent-project.yaml"
    project.write_text(PROJECT_YAML)
    return Runs(
        RunnerConfig(
            binary=FAKE_ARBIGENT,
            project_file=project,
            working_directory=tmp_path,
            settings=settings,
            cli=table,
            device_id=device_id,
        ),
        Redactor(),
        anyio.Event(),
    )


SELECTIONS = [Selection(), Selection(tag="login"), Selection(ids=("login", "checkout"))]
TASKS = [Selection(task=Task("check the login screen")), Selection(task=Task("-x @file", max_step=3, max_retry=0))]
VERSIONS = list(TABLES)


def fake_versions() -> ModuleType:
    """The fake's versions.py, loaded on its own (it imports nothing of the fake)."""
    path = FAKE_ARBIGENT.parent / "arbigent_fake" / "versions.py"
    spec = importlib.util.spec_from_file_location("arbigent_fake_versions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", VERSIONS)
def test_each_versions_table_is_exactly_its_real_option_lists(version: str) -> None:
    table: CliOptions | None = table_for(version)
    assert table is TABLES[version]
    real_run, real_task = REAL[version]
    assert {f"--{name}" for name in table.run} == real_run
    assert {f"--{name}" for name in table.task} == real_task


@pytest.mark.parametrize("version", VERSIONS)
def test_the_fake_knows_exactly_the_real_options_of_each_version(version: str) -> None:
    fake = fake_versions().version(version)
    real_run, real_task = REAL[version]
    assert {f"--{name}" for name in fake.run_options} == real_run
    assert {f"--{name}" for name in fake.task_options} == real_task


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("selection", SELECTIONS, ids=["all", "tag", "ids"])
def test_every_flag_of_a_scenario_run_is_a_real_run_option(tmp_path: Path, selection: Selection, version: str) -> None:
    argv = runs_for(tmp_path, version, DEVICE).argv(selection)
    assert argv[1] == "run" and argv[2].startswith("--")
    assert flag_names(argv[1:]) <= REAL[version][0]
    assert all(arg.startswith("--") for arg in argv[2:]), "always one --x=value argument, never a bare word"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("selection", TASKS, ids=["plain", "limits"])
def test_every_flag_of_a_task_run_is_a_real_run_task_option_after_task(
    tmp_path: Path, selection: Selection, version: str
) -> None:
    device = DEVICE if TABLES[version] is MAIN else None  # the old tables name no device for --os=web
    argv = runs_for(tmp_path, version, device).argv(selection)
    assert argv[1:3] == ["run", "task"]
    assert flag_names(argv[3:]) <= REAL[version][1]
    assert argv[-2:] == ["--", selection.task.goal if selection.task else ""]


def test_the_newest_cli_never_gets_the_superseded_device_option(tmp_path: Path) -> None:
    runs = runs_for(tmp_path, NEWEST, DEVICE)
    for selection in SELECTIONS + TASKS:
        argv = runs.argv(selection)
        assert "--ios-real-device-id" not in flag_names(argv)
        assert [a for a in argv if a.startswith("--device-id")] == [f"--device-id={DEVICE}"]


def test_an_old_cli_names_only_an_iphone(tmp_path: Path) -> None:
    runs = runs_for(tmp_path, "0.77.0", "emulator-5556")
    assert f"--ios-real-device-id={'emulator-5556'}" in runs.argv(Selection(tag="login"))  # config: run.os ios
    with pytest.raises(DeviceChoiceError, match="cannot be chosen for --os=web"):
        runs.argv(TASKS[0])  # config: run.task.os web
    with pytest.raises(DeviceChoiceError, match="arbigent 0.77.0 cannot choose the device for --os=android"):
        device_flag(V0_77, "android", "emulator-5556")


@pytest.mark.parametrize("version", VERSIONS)
def test_api_keys_never_reach_the_command_line(tmp_path: Path, version: str) -> None:
    runs = runs_for(tmp_path, version)
    keys = {"--openai-api-key", "--gemini-api-key", "--azure-openai-api-key", "--anthropic-api-key", "--jev-api-key"}
    for selection in SELECTIONS + TASKS:
        argv = " ".join(runs.argv(selection))
        assert "key-0000" not in argv and "sk-alias" not in argv
        assert not flag_names(runs.argv(selection)) & keys


def test_the_runner_decides_selection_and_place_itself(tmp_path: Path) -> None:
    argv = runs_for(tmp_path, "0.77.0").argv(Selection(tag="login"))
    assert not flag_names(argv) & {"--scenario-ids", "--dry-run", "--shard", "--working-directory"}
    assert [a for a in argv if a.startswith("--tags")] == ["--tags=login"]


@pytest.mark.integration
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("selection", [*SELECTIONS[:2], *TASKS], ids=["all", "tag", "task", "task-limits"])
def test_the_strict_fake_accepts_everything_the_runner_emits(
    tmp_path: Path, selection: Selection, version: str
) -> None:
    device = DEVICE if TABLES[version] is MAIN or selection.task is None else None
    runs = runs_for(tmp_path, version, device)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | runs.env(selection)
    env |= {"AGENTIFY_FAKE_PYTHON": sys.executable, "FAKE_ARBIGENT_VERSION": version}
    env["FAKE_ARBIGENT_DEVICES"] = f"emulator-5554,{DEVICE}"
    argv = runs.argv(selection)
    result = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Usage:" not in result.stderr
