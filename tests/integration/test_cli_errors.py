"""Every way a user can get the command line wrong: one line on stderr, the documented exit code,
never a traceback. The real `agentify` console script is spawned for each path."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AGENTIFY, fake_backend, write_config
from tests.integration.test_cli import agentify

pytestmark = pytest.mark.integration

# (arguments, environment, what stderr says, exit code); the {names} are filled in per test.
PATHS: dict[str, tuple[list[str], dict[str, str], str, int]] = {
    "serve --log-level": (["serve", "--log-level", "LOUD"], {}, "argument --log-level: 'LOUD' is not a log level", 2),
    "run --log-level": (["run", "x", "--log-level", "LOUD"], {}, "'LOUD' is not a log level", 2),
    "doctor --log-level": (["doctor", "--log-level", "loud"], {}, "'loud' is not a log level", 2),
    "eval --log-level": (["eval", "{cases}", "--log-level", "LOUD"], {}, "'LOUD' is not a log level", 2),
    "serve AGENTIFY_LOG_LEVEL": (
        ["serve", "--config", "{config}"],
        {"AGENTIFY_LOG_LEVEL": "loud"},
        "AGENTIFY_LOG_LEVEL=loud is not a log level",
        2,
    ),
    "run AGENTIFY_LOG_LEVEL": (["run", "x"], {"AGENTIFY_LOG_LEVEL": "loud"}, "AGENTIFY_LOG_LEVEL=loud", 2),
    "doctor AGENTIFY_LOG_LEVEL": (["doctor"], {"AGENTIFY_LOG_LEVEL": "loud"}, "AGENTIFY_LOG_LEVEL=loud", 2),
    "eval AGENTIFY_LOG_LEVEL": (["eval", "{cases}"], {"AGENTIFY_LOG_LEVEL": "loud"}, "AGENTIFY_LOG_LEVEL=loud", 2),
    "AGENTIFY_DEBUG_PORT": (
        ["serve", "--config", "{config}"],
        {"AGENTIFY_DEBUG_PORT": "abc"},
        "debugPort (from AGENTIFY_DEBUG_PORT): Input should be a valid integer",
        2,
    ),
    "AGENTIFY_PLANNER": (
        ["doctor", "--config", "{config}"],
        {"AGENTIFY_PLANNER": "magic"},
        "planner.provider (from AGENTIFY_PLANNER)",
        2,
    ),
    "AGENTIFY_CONFIG missing": (["doctor"], {"AGENTIFY_CONFIG": "{missing}"}, "does not exist", 2),
    "config is a folder": (["run", "x", "--config", "{folder}"], {}, "cannot be read: Is a directory", 2),
    "config not UTF-8": (["doctor", "--config", "{latin}"], {}, "latin.json is not UTF-8 text (byte 14)", 2),
    "config backends not a list": (
        ["serve", "--config", "{mixed}"],
        {},
        "backends in the config file {mixed} must be a list of backends, not str",
        2,
    ),
    "serve --port": (["serve", "--port", "abc"], {}, "agentify serve: argument --port: 'abc' is not a port number", 2),
    "serve --port range": (["serve", "--port", "70000"], {}, "--port: 70000 is not a port number: use 0 to", 2),
    "serve --debug-port": (["serve", "--debug-port", "x"], {}, "argument --debug-port: 'x' is not a port number", 2),
    "serve --transport": (["serve", "--transport", "tcp"], {}, "argument --transport: invalid choice: 'tcp'", 2),
    "unknown flag": (["doctor", "--bogus"], {}, "agentify doctor: unrecognized arguments: --bogus", 2),
    "unknown command": (["frob"], {}, "argument command: invalid choice: 'frob'", 2),
    "run without a query": (["run"], {}, "agentify run: the following arguments are required: query", 2),
    "eval without a file": (["eval"], {}, "agentify eval: the following arguments are required: file", 2),
    "eval file missing": (["eval", "{missing}", "--config", "{config}"], {}, "cannot be read", 2),
    "eval --extra-tools missing": (
        ["eval", "{cases}", "--extra-tools", "{missing}", "--config", "{config}"],
        {},
        "missing.json cannot be read",
        2,
    ),
    "eval --extra-tools clash": (
        ["eval", "{cases}", "--extra-tools", "{clash}", "--config", "{config}"],
        {},
        "agentify eval: the extra tools use backend ids that are configured already: fake",
        2,
    ),
    "eval --shortlist": (
        ["eval", "{cases}", "--shortlist", "0", "--config", "{config}"],
        {},
        "planner.shortlist (from the command line): Input should be greater than or equal to 1",
        2,
    ),
    "eval --planner sampling": (
        ["eval", "{cases}", "--planner", "sampling", "--config", "{config}"],
        {},
        "agentify eval: cannot plan this task: planner.provider is sampling but the client does not offer MCP sampling",
        1,
    ),
    "eval --planner openai without a key": (
        ["eval", "{cases}", "--planner", "openai", "--config", "{config}"],
        {},
        "planner.provider is openai but no API key is configured",
        1,
    ),
    "serve http on a busy port": (
        ["serve", "--transport", "http", "--port", "{busy}", "--config", "{config}"],
        {},
        "agentify serve: cannot listen on 127.0.0.1:{busy} (Address already in use); choose another port with --port",
        1,
    ),
}


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def _fill(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


@pytest.mark.parametrize("path", list(PATHS))
def test_a_cli_error_is_one_line_with_its_exit_code(tmp_path: Path, busy_port: int, path: str) -> None:
    args, env, expected, code = PATHS[path]
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "echo hi", "expect": {"backend": "fake", "tool": "echo"}}) + "\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "clash.json").write_text(json.dumps({"backends": [{"id": "fake", "tools": []}]}))
    (tmp_path / "latin.json").write_bytes(b'{"logLevel": "\xff"}')
    (tmp_path / "mixed.json").write_text(json.dumps({"backends": "x", "mcpServers": {"a": {"command": "y"}}}))
    values = {
        "config": str(write_config(tmp_path, [fake_backend()])),
        "cases": str(cases),
        "missing": str(tmp_path / "missing.json"),
        "folder": str(tmp_path / "folder"),
        "busy": str(busy_port),
        "clash": str(tmp_path / "clash.json"),
        "latin": str(tmp_path / "latin.json"),
        "mixed": str(tmp_path / "mixed.json"),
    }
    done = agentify(*(_fill(a, values) for a in args), env={k: _fill(v, values) for k, v in env.items()})
    assert _fill(expected, values) in done.stderr
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", [["serve"], ["run", "x"], ["doctor"], ["eval", "cases.jsonl"]])
def test_a_misspelled_config_key_stops_every_command_with_exit_2(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "cases.jsonl").write_text('{"query": "q", "expect": {"backend": "fake", "tool": "echo"}}\n')
    config = write_config(tmp_path, [fake_backend()], plannr={"provider": "offline"})
    done = agentify(*command, "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"agentify {command[0]}: invalid configuration (from {config} and the environment)")
    assert 'unknown key "plannr" (did you mean "planner"?)' in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_example_config_loads_with_its_comments(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "backends.example.json"
    data = json.loads(example.read_text())
    data["backends"] = []  # only the keys are under test here, not the backends
    path = tmp_path / "example.json"
    path.write_text(json.dumps(data))
    done = agentify("doctor", "--config", str(path))
    assert "invalid configuration" not in done.stderr and "Traceback" not in done.stderr
    assert "no backends configured" in done.stdout


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    """`agentify doctor | head -1`: the reader went away; that is no internal error and no traceback."""
    config = write_config(tmp_path, [])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    process = subprocess.Popen(
        [str(AGENTIFY), "doctor", "--config", str(config)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # before the child has written anything: every write of it fails
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 1
    assert errors == ""
