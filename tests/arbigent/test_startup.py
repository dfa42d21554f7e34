"""Start-up checks: each failure is a clear message on stderr and a non-zero exit before serving."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from agentify.arbigent.errors import StartupError
from agentify.arbigent.executable import find_arbigent
from agentify.arbigent.yamlfile import MAX_FILE_BYTES

from .support import FAKE_ARBIGENT, Workspace

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def private_runtime_dir(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the runners started here keep their run locks (instead of the user's cache dir)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(workspace.runtime))


def start(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The runner with stdin at EOF, so a runner that passes its checks serves nothing and exits 0."""
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "agentify.arbigent", *args],
        env=environment | (env or {}),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def args_for(workspace: Workspace, **changes: str | None) -> list[str]:
    values: dict[str, str | None] = {
        "--project": str(workspace.project),
        "--config": str(workspace.config),
        "--arbigent-bin-path": str(FAKE_ARBIGENT),
    }
    values.update({f"--{k.replace('_', '-')}": v for k, v in changes.items()})
    return [part for name, value in values.items() if value is not None for part in (name, value)]


def assert_fails(result: subprocess.CompletedProcess[str], message: str, code: int = 1) -> None:
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_a_missing_required_argument_is_a_usage_error(workspace: Workspace) -> None:
    assert_fails(start(args_for(workspace, config=None)), "the following arguments are required: --config", code=2)


def test_a_missing_project_file_is_named(workspace: Workspace) -> None:
    missing = workspace.root / "nope.yaml"
    assert_fails(start(args_for(workspace, project=str(missing))), f"project file not found: {missing}")


def test_a_project_file_that_is_not_yaml_gives_file_and_line(workspace: Workspace) -> None:
    workspace.project.write_text("scenarios:\n- id: a\n  goal: Log in: now\n")
    assert_fails(start(args_for(workspace)), f"project file {workspace.project} is not valid YAML: line 3")


def test_a_project_file_without_scenarios_is_refused(workspace: Workspace) -> None:
    workspace.project.write_text("settings: {}\n")
    assert_fails(start(args_for(workspace)), "has no top-level `scenarios` list")


def test_a_missing_config_file_is_named(workspace: Workspace) -> None:
    missing = workspace.root / "missing-config.yaml"
    assert_fails(start(args_for(workspace, config=str(missing))), f"config file not found: {missing}")


def test_a_missing_bin_path_is_refused(workspace: Workspace) -> None:
    missing = workspace.root / "bin" / "arbigent"
    assert_fails(start(args_for(workspace, arbigent_bin_path=str(missing))), "--arbigent-bin-path")


def test_a_bin_path_that_is_not_executable_is_refused(workspace: Workspace) -> None:
    plain = workspace.root / "arbigent"
    plain.write_text("#!/bin/sh\n")
    assert_fails(start(args_for(workspace, arbigent_bin_path=str(plain))), "is not executable")


def test_no_arbigent_on_path_says_what_was_searched_and_how_to_install(workspace: Workspace, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = start(args_for(workspace, arbigent_bin_path=None), env={"PATH": str(empty)})
    assert_fails(
        result, f"looked for ./arbigentw in {workspace.root}, then arbigent then arbigent-cli on PATH. Install it"
    )
    assert str(empty) not in result.stderr  # the whole PATH would drown the hint
    assert "brew install takahirom/repo/arbigent" in result.stderr


def test_a_settings_file_that_would_filter_every_run_is_refused(workspace: Workspace) -> None:
    (workspace.root / ".arbigent").mkdir()
    (workspace.root / ".arbigent" / "settings.local.yml").write_text("dry-run: true\n")
    assert_fails(start(args_for(workspace)), "sets dry-run")


def test_a_missing_api_key_is_warned_about_and_stdin_eof_ends_the_server(workspace: Workspace) -> None:
    workspace.config.write_text("ai-type: gemini\n")
    result = start(args_for(workspace))
    assert result.returncode == 0, result.stderr
    assert "no API key for ai-type gemini: runs will fail until GEMINI_API_KEY is set" in result.stderr
    assert result.stdout == ""


def test_arbigent_is_found_on_path_before_arbigent_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("arbigent", "arbigent-cli"):
        (tmp_path / name).symlink_to(FAKE_ARBIGENT)
    monkeypatch.setenv("PATH", str(tmp_path))
    project_dir = tmp_path / "elsewhere"
    project_dir.mkdir()
    assert find_arbigent(None, project_dir).path == tmp_path / "arbigent"
    (tmp_path / "arbigent").unlink()
    assert find_arbigent(None, project_dir).path == tmp_path / "arbigent-cli"
    (tmp_path / "arbigent-cli").unlink()
    with pytest.raises(StartupError):
        find_arbigent(None, project_dir)


def limited_memory() -> None:
    """Runs in the child before exec: 2 GiB of address space, so a YAML bomb fails instead of swapping."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


BILLION_LAUGHS = (
    "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "scenarios:\n- id: x\n  goal: g\n  tags: *i\n"
)


def test_a_billion_laughs_project_fails_with_one_line_instead_of_growing_memory(workspace: Workspace) -> None:
    assert len(BILLION_LAUGHS) < 800
    workspace.project.write_text(BILLION_LAUGHS)
    result = subprocess.run(
        [sys.executable, "-m", "agentify.arbigent", *args_for(workspace)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
        preexec_fn=limited_memory,
    )
    assert_fails(result, "its aliases expand to more than")
    assert len(result.stderr.splitlines()) == 1 and len(result.stderr) < 400


def test_a_fifo_as_the_project_file_does_not_hang_start_up(workspace: Workspace) -> None:
    fifo = workspace.root / "project.fifo"
    os.mkfifo(fifo)
    result = start(args_for(workspace, project=str(fifo)))
    assert_fails(result, f"project file {fifo} is not a regular file (a FIFO)")
    assert len(result.stderr.splitlines()) == 1


def test_a_project_file_over_the_size_limit_is_refused(workspace: Workspace) -> None:
    workspace.project.write_text("scenarios: []\n#" + "x" * MAX_FILE_BYTES + "\n")
    result = start(args_for(workspace))
    assert_fails(result, f"over the limit of {MAX_FILE_BYTES:,}")
    assert len(result.stderr.splitlines()) == 1


def test_a_project_with_scenarios_without_id_starts(workspace: Workspace) -> None:
    workspace.project.write_text('scenarios:\n- goal: "Open the app."\n  tags:\n  - name: "smoke"\n')
    result = start(args_for(workspace), env={"OPENAI_API_KEY": "k"})
    assert result.returncode == 0, result.stderr


def test_a_settings_key_in_the_wrong_case_is_refused_at_start_up(workspace: Workspace) -> None:
    workspace.config.write_text("run:\n  ai-type: OpenAI-Compatible\n")
    assert_fails(
        start(args_for(workspace)), "run.ai-type: 'OpenAI-Compatible' is not one of openai, gemini, azureopenai"
    )


@pytest.mark.parametrize("depth", [500, 80_000])
def test_a_project_nested_too_deep_fails_with_one_line_instead_of_crashing(workspace: Workspace, depth: int) -> None:
    """80 kB of `[` took the runner down with SIGSEGV where libyaml sets no nesting limit of its own (this
    machine's stops at 1,000 levels); agentify's own limit, 100, holds whatever libyaml does."""
    workspace.project.write_text("scenarios: " + "[" * depth + "]" * min(depth, 500) + "\n")
    result = start(args_for(workspace))
    assert_fails(result, f"project file {workspace.project}")
    assert "nested more than 100 levels" in result.stderr or "maximum nesting depth" in result.stderr
    assert len(result.stderr.splitlines()) == 1
