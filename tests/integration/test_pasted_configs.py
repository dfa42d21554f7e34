"""An IDE's config file used as it is: `.cursor/mcp.json` with paths relative to the workspace, and
what `doctor` says when one of its servers cannot start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AGENTIFY, REPO

pytestmark = pytest.mark.integration


def test_doctor_on_a_cursor_config_resolves_paths_in_the_workspace_and_shows_the_error_line(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    (workspace / ".cursor").mkdir(parents=True)
    (workspace / "node_modules").symlink_to(REPO / "node_modules")
    config = workspace / ".cursor" / "mcp.json"
    config.write_text(
        "{\n  // as Cursor writes it: paths relative to the project\n"
        + json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "node",
                        "args": ["node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "."],
                    },
                    "broken": {"command": "node", "args": ["tools/missing-server.js"]},
                }
            }
        )[1:]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    done = subprocess.run(
        [str(AGENTIFY), "doctor", "--config", str(config)],
        env=env | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(("files", "broken"))}
    assert " ready " in rows["files"], done.stdout
    assert "Error: Cannot find module" in rows["broken"] and "missing-server.js" in rows["broken"], done.stdout
    assert "Node.js v" not in rows["broken"] and "requireStack" not in rows["broken"], done.stdout
    assert f"relative paths resolve against: {workspace.resolve()}" in done.stdout, done.stdout


def doctor(config: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    return subprocess.run(
        [str(AGENTIFY), "doctor", "--config", str(config)],
        env=env | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a":' + "[" * 200_000, "nests deeper than 64 levels"),
        ('{"a":' + "[" * 900 + "]" * 900 + "}", "nests deeper than 64 levels"),
        ('{"backends": []}' + " " * (5 * 1024 * 1024), "is larger than 4 MiB"),
    ],
    ids=["deep", "deep-but-parsable", "huge"],
)
def test_a_config_too_deep_or_too_large_is_a_clear_config_error(tmp_path: Path, text: str, said: str) -> None:
    config = tmp_path / "agentify.json"
    config.write_text(text)
    done = doctor(config, tmp_path)
    assert done.returncode != 0 and said in done.stderr, done.stderr
    assert "RecursionError" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_an_env_file_too_large_is_a_clear_config_error(tmp_path: Path) -> None:
    (tmp_path / "big.env").write_text("A=" + "x" * (5 * 1024 * 1024))
    config = tmp_path / "agentify.json"
    config.write_text(json.dumps({"mcpServers": {"a": {"command": "node", "envFile": "big.env"}}}))
    done = doctor(config, tmp_path)
    assert done.returncode != 0 and "big.env, which is larger than 4 MiB" in done.stderr, done.stderr


def test_doctor_shows_a_backends_self_description_escaped_and_cut(tmp_path: Path) -> None:
    described = "helper\nresult: all good\u202e" + "d" * 5000
    asking = [str(REPO / "tests/fakes/asking_backend.py"), "--describe", described]
    config = tmp_path / "agentify.json"
    config.write_text(json.dumps({"backends": [{"id": "ask", "command": sys.executable, "args": asking}]}))
    done = doctor(config, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [server] = [line for line in done.stdout.splitlines() if "server: asking-fake" in line]
    assert "helper\\nresult: all good\\u202e" in server and len(server) < 500, server
    assert [line for line in done.stdout.splitlines() if line.startswith("result:")] == ["result: all good"]
