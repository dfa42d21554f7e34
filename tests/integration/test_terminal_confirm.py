"""`agentify run` at a terminal asks y/N before a tool that needs confirmation, and asks for the arguments a
task does not say: driven through a real pseudo-terminal (the CLI sees a TTY on stdin and stderr). Without a
TTY it refuses and names `--yes` (or the arguments to say); at the terminal its hints name commands, not MCP
tools."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTIFY, API_KEY, fake_backend, fs_backend, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = pytest.mark.integration

LIMIT = 120.0  # generous: the machine is shared


def run_env(model: ModelServer, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    return base | {
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": model.base_url,
        "AGENTIFY_CACHE_DIR": str(tmp_path / "cache"),
    }


def confirming_config(tmp_path: Path, workspace: Path) -> Path:
    return write_config(tmp_path, [fs_backend(workspace, tools={"confirm": ["write_file"]})])


def read_until(fd: int, wanted: str, seconds: float = LIMIT) -> str:
    """What the terminal shows, up to `wanted` (bounded)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while wanted.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"the terminal never showed {wanted!r}; it showed {seen.decode(errors='replace')!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


@pytest.mark.parametrize("answer", ["y", "n"])
def test_run_at_a_terminal_asks_before_a_confirmed_tool(
    tmp_path: Path, workspace: Path, model: ModelServer, answer: str
) -> None:
    target = workspace / "out.txt"
    model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "hi"}))
    config = confirming_config(tmp_path, workspace)
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            [str(AGENTIFY), "run", "write hi", "--config", str(config), "--cwd", str(workspace), "--log-level", "INFO"],
            env=run_env(model, tmp_path),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            start_new_session=True,
        )
        os.close(terminal)
        shown = read_until(controller, "[y/N]")
        assert "write_file on backend fs" in shown and str(target) in shown, shown
        os.write(controller, f"{answer}\n".encode())
        out, _ = process.communicate(timeout=LIMIT)
        after = read_until(controller, "\x00", seconds=5) if answer == "n" else ""  # the rest, until it closed
    finally:
        os.close(controller)
    if answer == "y":
        assert process.returncode == 0, out
        assert target.read_text() == "hi"
    else:
        assert process.returncode == 1
        assert "you declined the confirmation for fs.write_file, so it was not run" in out, out
        assert not target.exists()
        (logged,) = [line for line in after.splitlines() if "task failed (denied)" in line]
        assert "| INFO " in logged, logged  # the user's answer, not a failure


def test_run_without_a_terminal_refuses_and_names_yes(tmp_path: Path, workspace: Path, model: ModelServer) -> None:
    target = workspace / "out.txt"
    config = confirming_config(tmp_path, workspace)
    args = [str(AGENTIFY), "run", "write hi to out.txt", "--config", str(config), "--cwd", str(workspace)]
    model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "hi"}))
    refused = subprocess.run(
        args, env=run_env(model, tmp_path), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT
    )
    assert refused.returncode == 1
    assert "there is no terminal to ask at" in refused.stdout and "pass --yes" in refused.stdout, refused.stdout
    assert not target.exists()
    model.push(Reply.tool_call("fs__write_file", {"path": str(target), "content": "hi"}))
    allowed = subprocess.run(
        [*args, "--yes"],
        env=run_env(model, tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert target.read_text() == "hi"


def test_run_with_every_backend_down_names_a_command(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake", "--exit-at-start")])
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    done = subprocess.run(
        [str(AGENTIFY), "run", "echo hello", "--config", str(config)],
        env=base | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )
    assert done.returncode == 1
    assert "agentify doctor" in done.stdout and "list_backends" not in done.stdout, done.stdout


def forecast_run(tmp_path: Path, stdin: int) -> subprocess.Popen[str]:
    """`agentify run "what's the weather forecast?"` on the forecast backend with the offline planner, whose
    `city` and `units` the task does not say; stderr on the same terminal as stdin when it is one."""
    config = write_config(tmp_path, [fake_backend("fake", "--forecast")], planner={"provider": "offline"})
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    return subprocess.Popen(
        [str(AGENTIFY), "run", "what's the weather forecast?", "--config", str(config)],
        env=base | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")},
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=stdin if stdin != subprocess.DEVNULL else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize(
    ("lines", "code", "said"),
    [
        (["Paris", "celsius"], 0, "forecast for Paris in celsius for 1 days: sunny"),
        (["Paris", "kelvin"], 1, "does not fit the tool: units: 'kelvin' is not one of"),
        (["\x04"], 1, "you dismissed the question for city, units of fake.forecast, so nothing was run"),
    ],
)
def test_run_at_a_terminal_asks_for_the_arguments_the_task_does_not_say(
    tmp_path: Path, lines: list[str], code: int, said: str
) -> None:
    controller, terminal = os.openpty()
    try:
        process = forecast_run(tmp_path, terminal)
        os.close(terminal)
        shown = read_until(controller, "city (The city to forecast, such as Paris): ")
        assert "agentify chose fake.forecast for this task; it needs: city, units" in shown, shown
        os.write(controller, f"{lines[0]}\n".encode() if lines[0] != "\x04" else b"\x04")
        if len(lines) > 1:
            read_until(controller, "units (Temperature units) [celsius/fahrenheit]: ")
            os.write(controller, f"{lines[1]}\n".encode())
        out, _ = process.communicate(timeout=LIMIT)
    finally:
        os.close(controller)
    assert process.returncode == code, out
    assert said in out, out


def test_run_without_a_terminal_names_the_arguments_to_say(tmp_path: Path) -> None:
    process = forecast_run(tmp_path, subprocess.DEVNULL)
    out, _ = process.communicate(timeout=LIMIT)
    assert process.returncode == 1
    assert "agentify no_plan:" in out and "Say the value of `city` and `units` in the task" in out, out
