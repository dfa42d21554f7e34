"""The `agentify` command line: run, doctor and configuration errors, as a user types them."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, API_KEY, fake_backend, fs_backend, gateway_env, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = pytest.mark.integration


_STATE = tempfile.TemporaryDirectory(prefix="agentify-cli-state-")
"""The state folder (pins) of the commands these tests run, removed when the test process ends."""


def agentify(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    base["AGENTIFY_STATE_DIR"] = _STATE.name  # never the user's pins (a test may name its own)
    return subprocess.run(
        [str(AGENTIFY), *args],
        env=base | (env or {}),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_run_prints_the_backend_result_and_exits_0(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    model.push(Reply.tool_call("fs__read_text_file", {"path": str(workspace / "notes.txt")}))
    config = write_config(tmp_path, [fs_backend(workspace)])
    done = agentify("run", "read notes.txt", "--config", str(config), "--cwd", str(workspace), env=gateway_env(model))
    assert done.returncode == 0, done.stderr
    assert "remember the milk" in done.stdout
    assert "fs.read_text_file" in done.stdout
    assert f"current working directory: {workspace}" in model.user_messages()[0]


def test_run_json_and_dry_run(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    target = workspace / "new.txt"
    model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "hi"}))
    config = write_config(tmp_path, [fs_backend(workspace)])
    done = agentify("run", "write new.txt", "--dry-run", "--json", "--config", str(config), env=gateway_env(model))
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["structuredContent"]["tool"] == "write_file"
    assert not target.exists()


def test_run_failure_exits_non_zero_with_the_reason(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    done = agentify("run", "echo hi", "--config", str(config), env=gateway_env(None))
    assert done.returncode == 1
    # No key: the offline planner refuses a task it cannot fill (`no_plan`), saying how to configure a model.
    assert "no_plan" in done.stdout and "OPENAI_API_KEY" in done.stdout


def test_doctor_reports_each_backend_and_the_planner(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fs_backend(workspace), fake_backend()])
    done = agentify("doctor", "--config", str(config), env=gateway_env(model))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:3] == ["fs", "ready", "14"] for line in lines), done.stdout
    assert any(line.split()[:2] == ["fake", "ready"] for line in lines)
    assert "planner: openai" in done.stdout and "all good" in done.stdout
    assert API_KEY not in done.stdout + done.stderr


def test_doctor_exits_1_when_a_backend_is_broken(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend("broken", "--exit-at-start"), fake_backend()])
    done = agentify("doctor", "--config", str(config), env=gateway_env(model))
    assert done.returncode == 1
    broken = next(line for line in done.stdout.splitlines() if line.startswith("broken"))
    assert "failed" in broken and "exited with code 3" in broken and "cannot open the database" in broken


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"backends": [{"id": "a b", "command": "x"}]}', "backends.0.id"),
        ('{"backends": [{"id": "a"}]}', "backends.0: backend 'a' needs exactly one of command"),
        ('{"backends": [{"id": "a", "command": "x", "timeoutSeconds": -1}]}', "backends.0.timeoutSeconds"),
        ('{"backends": [{"id": "a", "command": "x"}, {"id": "a", "command": "y"}]}', "used twice"),
        ('{"planner": {"provider": "magic"}}', "planner.provider"),
        ('{"backends": [', "not valid JSON"),
        ('{"planner": {"apiKey": "${AGENTIFY_TEST_UNSET_VAR}"}}', "AGENTIFY_TEST_UNSET_VAR"),
    ],
    ids=["bad-id", "no-command", "negative-timeout", "duplicate-id", "bad-provider", "bad-json", "missing-var"],
)
def test_invalid_config_is_one_readable_message_and_exit_2(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "agentify.json"
    path.write_text(content)
    for command in ("serve", "doctor"):
        done = agentify(command, "--config", str(path))
        assert done.returncode == 2
        assert expected in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_missing_config_file_is_exit_2(tmp_path: Path) -> None:
    done = agentify("doctor", "--config", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_mcp_servers_map_and_env_expansion_are_accepted(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    server = fs_backend(workspace)
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "${NODE_BIN}", "args": server["args"]},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    done = agentify("doctor", "--config", str(path), env=gateway_env(model, NODE_BIN="node"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(line.split()[:2] == ["files", "ready"] for line in done.stdout.splitlines())
    assert any(line.split()[:2] == ["off", "disabled"] for line in done.stdout.splitlines())


def _arbigent_without_cli(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The example config's arbigent backend, on a PATH where no arbigent CLI can be found."""
    repo = Path(__file__).resolve().parents[2]
    example = json.loads((repo / "backends.example.json").read_text())
    backend = next(b for b in example["backends"] if b["id"] == "arbigent")
    backend |= {"command": str(AGENTIFY), "cwd": str(repo), "env": {}}
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return write_config(tmp_path, [backend, fake_backend()]), {"PATH": str(empty), "PYTHONPATH": str(repo)}


def test_a_missing_arbigent_cli_is_reported_once_in_short(tmp_path: Path) -> None:
    config, env = _arbigent_without_cli(tmp_path)
    doctor = agentify("doctor", "--config", str(config), env=env)
    run = agentify("run", "echo hi", "--config", str(config), env=env)
    assert doctor.returncode == 1
    row = next(line for line in doctor.stdout.splitlines() if line.startswith("arbigent"))
    assert "failed" in row and "arbigent CLI was not found" in row and "brew install" in row
    assert (doctor.stdout + doctor.stderr).count("arbigent CLI was not found") == 1  # the table says it
    (said,) = [line for line in run.stderr.splitlines() if "arbigent" in line]
    assert said.startswith("agentify run: backend arbigent did not start: the arbigent CLI was not found"), said
    assert len(said) < 200 and "agentify doctor" in said
    for output in (doctor.stdout, doctor.stderr, run.stdout, run.stderr):
        assert env["PATH"] not in output  # the searched PATH is not dumped


def test_run_reports_a_failed_task_once(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    done = agentify("run", "echo hi", "--config", str(config), env={"AGENTIFY_PLANNER": "openai"})
    assert done.returncode == 1
    assert "planner_unavailable" in done.stdout
    assert (done.stdout + done.stderr).count("no API key is configured") == 1, done.stdout + done.stderr
