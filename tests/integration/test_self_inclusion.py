"""A config that contains agentify itself starts one agentify, not a chain: directly, through a wrapper
script, under `serve`, `doctor` and `run`; and a gateway whose stdin is already closed starts nothing.

Processes are counted from /proc by their command line, which names the test's own config file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import AGENTIFY, REPO, fake_backend, gateway, gateway_env, write_config

pytestmark = pytest.mark.integration

LIMIT = 90.0  # generous: the machine is shared; how fast is not what these tests measure


def mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text` (from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # ended while we looked
        if state != "Z" and any(text.encode() in arg for arg in argv):
            found.append(int(cmdline.parent.name))
    return found


def self_including(tmp_path: Path, how: str) -> Path:
    """A config whose backends hold agentify itself: `direct` (the installed command, and
    `python -m agentify`) or `wrapper` (a shell script that runs it, which no name check can see)."""
    config = tmp_path / "agentify.json"
    if how == "direct":
        entries: list[dict[str, Any]] = [
            {"id": "me", "command": str(AGENTIFY), "args": ["serve", "--config", str(config)]},
            {"id": "me_too", "command": sys.executable, "args": ["-m", "agentify", "--config", str(config)]},
        ]
    else:
        wrapper = tmp_path / "start-agentify.sh"
        wrapper.write_text(f'#!/bin/sh\nexec "{AGENTIFY}" serve --config "{config}" "$@"\n')
        wrapper.chmod(0o755)
        entries = [{"id": "me", "command": str(wrapper)}]
    write_config(tmp_path, [*entries, fake_backend()])
    return config


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["direct", "wrapper"])
async def test_serve_with_itself_in_its_config_runs_one_gateway(tmp_path: Path, how: str) -> None:
    config = self_including(tmp_path, how)
    async with gateway(config, gateway_env(None), tmp_path / "stderr.log") as session:
        with anyio.fail_after(LIMIT):
            while True:
                listing = await session.call_tool("list_backends", {})
                states = {b["id"]: b["state"] for b in (listing.structured_content or {})["backends"]}
                if states.get("fake") == "ready" and states.get("me") not in ("starting", "restarting"):
                    break
                await anyio.sleep(0.05)
        if how == "direct":
            assert states == {"fake": "ready"}, states  # both self entries skipped
        else:
            me = next(b for b in (listing.structured_content or {})["backends"] if b["id"] == "me")
            assert me["state"] == "failed", me
            assert "started as a backend of the agentify gateway" in me["lastError"], me
        # The gateway itself and nothing else that reads this config.
        assert len(mentioning(str(config))) == 1, mentioning(str(config))
    log = (tmp_path / "stderr.log").read_text()
    if how == "direct":
        assert log.count("starts agentify itself: skipped") == 2, log


@pytest.mark.parametrize("how", ["direct", "wrapper"])
@pytest.mark.parametrize("command", ["doctor", "run"])
def test_doctor_and_run_with_itself_in_the_config_leave_no_process(tmp_path: Path, how: str, command: str) -> None:
    config = self_including(tmp_path, how)
    args = ["doctor"] if command == "doctor" else ["run", "echo hello", "--dry-run"]
    env = base_env() | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(AGENTIFY), *args, "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT * 2,
        stdin=subprocess.DEVNULL,
    )
    if command == "doctor":
        assert "fake" in done.stdout and "ready" in done.stdout, done.stdout + done.stderr
        if how == "wrapper":
            assert "started as a backend of the agentify gateway" in done.stdout, done.stdout
    deadline = time.monotonic() + LIMIT
    while mentioning(str(config)):  # the backends were stopped when it exited: bounded wait for the kernel
        assert time.monotonic() < deadline, f"left behind: {mentioning(str(config))}"
        time.sleep(0.05)


def test_a_gateway_whose_stdin_is_closed_starts_no_backend(tmp_path: Path) -> None:
    marker = tmp_path / "started.txt"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker))])
    env = base_env() | gateway_env(None) | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(AGENTIFY), "serve", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert not marker.exists(), marker.read_text()


def test_a_gateway_started_by_a_gateway_refuses_and_says_why(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    done = subprocess.run(
        [str(AGENTIFY), "serve", "--config", str(config)],
        env=base_env() | {"AGENTIFY_PARENT": "4242"},
        capture_output=True,
        text=True,
        timeout=LIMIT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "agentify gateway with pid 4242" in done.stderr and "Remove that backend" in done.stderr, done.stderr
    assert json.dumps(done.stderr).count("\\n") == 1  # one line
