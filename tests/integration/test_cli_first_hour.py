"""What a new user meets in the first hour: a variable that is not set for one server, where the config
is looked for, and the environment backends get; the real `agentify` is spawned each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, REPO, fake_backend, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply
from tests.integration.ide_client import MODES, ide_client
from tests.integration.test_cli import agentify
from tests.integration.test_terminal_confirm import LIMIT, read_until, run_env

pytestmark = pytest.mark.integration

MISSING = "AGENTIFY_TEST_NEVER_SET_PAT"
PROMPT_SECONDS = 8


def _with_missing_variable(directory: Path) -> Path:
    path = write_config(directory, [fake_backend()], planner={"provider": "offline"})
    config: dict[str, Any] = json.loads(path.read_text())
    config["mcpServers"] = {"github": {"command": "npx", "env": {"GITHUB_PAT": "${" + MISSING + "}"}}}
    path.write_text(json.dumps(config))
    return path


def test_doctor_names_the_server_and_the_variable_and_shows_the_others_ready(tmp_path: Path) -> None:
    config = _with_missing_variable(tmp_path)
    done = agentify("doctor", "--config", str(config), env=gateway_env(None))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:2] == ["fake", "ready"] for line in lines), done.stdout
    github = next(line for line in lines if line.startswith("github"))
    assert github.split()[1] == "failed" and f"environment variable {MISSING} is not set" in github
    assert "mcpServers.github.env.GITHUB_PAT" in github


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_serve_serves_the_other_backends_and_shows_the_failed_one(tmp_path: Path, mode: str) -> None:
    config = _with_missing_variable(tmp_path)
    async with ide_client(config, gateway_env(None), tmp_path / "stderr.log", mode) as client:
        called = await client.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "hi"}})
        assert not called.is_error and text_of(called) == "echo: hi"
        listing = await client.call_tool("list_backends", {})
    backends = {b["id"]: b for b in (listing.structured_content or {})["backends"]}
    assert backends["fake"]["state"] == "ready"
    assert backends["github"]["state"] == "failed"
    assert f"environment variable {MISSING} is not set" in backends["github"]["lastError"]


DUMP = (
    "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ))); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def _env_dumping(backend_id: str, dump: Path, **extra: Any) -> dict[str, Any]:
    """The fake backend started through a line of Python that first writes the environment it got to `dump`."""
    fake = fake_backend(backend_id)
    args = ["-c", DUMP, str(dump), fake["command"], *fake["args"]]
    return {"id": backend_id, "command": sys.executable, "args": args} | extra


OUTSIDE = {
    "HTTPS_PROXY": "http://proxy.example:3128",
    "no_proxy": "localhost,127.0.0.1",
    "SSL_CERT_FILE": "/etc/company-ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/company-ca.pem",
    "LC_ALL": "C.UTF-8",
    "AWS_PROFILE": "work",
    "AWS_REGION": "eu-west-1",
    "UNRELATED_SECRET": "never-passed-by-default",
}


def test_backends_get_the_proxy_ca_and_locale_variables_and_what_inherit_env_names(tmp_path: Path) -> None:
    dumps = {name: tmp_path / f"{name}.json" for name in ("plain", "listed", "everything", "top")}
    backends = [
        _env_dumping("plain", dumps["plain"]),
        _env_dumping("listed", dumps["listed"], inheritEnv=["AWS_*"]),
        _env_dumping("everything", dumps["everything"], inheritEnv=True),
    ]
    config = write_config(tmp_path, backends, planner={"provider": "offline"})
    done = agentify("doctor", "--config", str(config), env=gateway_env(None, **OUTSIDE))
    assert done.returncode == 0, done.stdout + done.stderr
    seen = {name: json.loads(path.read_text()) for name, path in dumps.items() if path.exists()}
    safe = {k: v for k, v in OUTSIDE.items() if not k.startswith(("AWS_", "UNRELATED"))}
    assert {k: seen["plain"].get(k) for k in OUTSIDE} == safe | dict.fromkeys(set(OUTSIDE) - set(safe))
    assert seen["listed"]["AWS_PROFILE"] == "work" and seen["listed"]["AWS_REGION"] == "eu-west-1"
    assert "UNRELATED_SECRET" not in seen["listed"]
    assert seen["everything"]["UNRELATED_SECRET"] == "never-passed-by-default"

    top = write_config(
        tmp_path, [_env_dumping("top", dumps["top"])], inheritEnv=["UNRELATED_SECRET"], planner={"provider": "offline"}
    )
    done = agentify("doctor", "--config", str(top), env=gateway_env(None, **OUTSIDE))
    assert done.returncode == 0, done.stdout + done.stderr
    passed = json.loads(dumps["top"].read_text())
    assert passed["UNRELATED_SECRET"] == "never-passed-by-default" and "AWS_PROFILE" not in passed


def test_the_readme_first_task_works_from_the_checkout_with_the_example_config(tmp_path: Path) -> None:
    """As the README says it: from the checkout root, `agentify run "list the files in docs"` with
    backends.example.json; where the arbigent CLI is missing, one short line says so, and no backend is
    asked for a list it does not serve."""
    env = {"AGENTIFY_PLANNER": "offline", "AGENTIFY_CACHE_DIR": str(tmp_path / "cache")}
    done = agentify("run", "list the files in docs", "--config", "backends.example.json", cwd=REPO, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[FILE] configuration.md" in done.stdout and "Access denied" not in done.stdout
    assert "Method not found" not in done.stderr
    about_arbigent = [line for line in done.stderr.splitlines() if "arbigent" in line]
    assert len(about_arbigent) <= 1 and all(len(line) < 200 for line in about_arbigent), done.stderr

    fake_cli = {"PATH": f"{REPO / 'tests' / 'fakes'}{os.pathsep}{os.environ['PATH']}", "ARBIGENT_OPENAI_API_KEY": "k"}
    with_cli = agentify(
        "run", "list the files in docs", "--config", "backends.example.json", cwd=REPO, env=env | fake_cli
    )
    assert with_cli.returncode == 0, with_cli.stdout + with_cli.stderr
    assert "Method not found" not in with_cli.stderr and "arbigent" not in with_cli.stderr, with_cli.stderr


def _slow_config(tmp_path: Path, **tools: Any) -> Path:
    return write_config(tmp_path, [fake_backend(tools=tools)] if tools else [fake_backend()])


def test_run_piped_shows_its_progress_as_plain_lines(tmp_path: Path, model: ModelServer) -> None:
    model.push(Reply.tool_call("fake__slow", {"seconds": 1}))
    done = agentify("run", "wait a second", "--config", str(_slow_config(tmp_path)), env=run_env(model, tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert "agentify run: planning" in lines and "agentify run: calling fake.slow" in lines, done.stderr
    assert any(line.startswith("agentify run: fake.slow: step ") for line in lines), done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    assert done.stdout.startswith("# fake.slow") and "slept 1" in done.stdout


def test_run_at_a_terminal_shows_one_status_line_and_leaves_the_prompt_out_of_its_time(
    tmp_path: Path, model: ModelServer
) -> None:
    model.push(Reply.tool_call("fake__slow", {"seconds": 1}))
    config = _slow_config(tmp_path, confirm=["slow"])
    controller, terminal = os.openpty()
    began = time.monotonic()
    try:
        process = subprocess.Popen(
            [str(AGENTIFY), "run", "wait a second", "--config", str(config)],
            env=run_env(model, tmp_path),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            start_new_session=True,
        )
        os.close(terminal)
        shown = read_until(controller, "[y/N]")
        asked = time.monotonic()
        time.sleep(PROMPT_SECONDS)  # the user thinks it over: not the task's time
        os.write(controller, b"y\n")
        thinking = time.monotonic() - asked
        out, _ = process.communicate(timeout=LIMIT)
        whole = time.monotonic() - began
        shown += read_until(controller, "\x00", seconds=5)
    finally:
        os.close(controller)
    assert process.returncode == 0, out
    assert "\r\x1b[Kagentify run: planning" in shown and "\r\x1b[Kagentify run: fake.slow: step" in shown, shown
    took = int(out.splitlines()[0].rsplit("(", 1)[1].removesuffix(" ms)"))
    # Whatever the machine's speed: the process ran `whole`, of which the user thought `thinking`.
    assert took <= (whole - thinking) * 1000, (out, whole, thinking)
    assert took < thinking * 1000, (out, thinking)  # a 1 s call: counting the 8 s at the prompt would pass this


def _only_python_and_node(tmp_path: Path) -> str:
    """A PATH like a machine without apt-get, redis-server, haproxy or chromium (macOS): every other
    program of this one is still there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    missing = ("apt", "apt-get", "redis-server", "haproxy", "chromium", "chromium-browser", "arbigent", "arbigent-cli")
    for directory in os.environ["PATH"].split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name not in missing and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(folder)


def test_the_demo_runs_with_only_python_and_node_and_says_it_skips_the_browser(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_", "CHROMIUM"))}
    env = base | {
        "PATH": _only_python_and_node(tmp_path),
        "HOME": str(tmp_path),
        "AGENTIFY_CACHE_DIR": str(tmp_path / "cache"),
        "CHROMIUM": str(tmp_path / "no-chromium-here"),
    }
    done = subprocess.run(
        [str(REPO / "scripts" / "demo.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "chromium is not installed, so the demo skips the browser backend" in done.stdout
    assert "result: all good" in done.stdout, done.stdout
    assert "[FILE] configuration.md" in done.stdout and "PASSED" in done.stdout
    assert "setup:" not in done.stderr  # nothing it would have had to install


def test_the_start_up_log_never_prints_a_secret_passed_as_an_argument(tmp_path: Path) -> None:
    secrets = ["sk-proj-argument-secret-1", "tok-equals-secret-22", "env-style-secret-333"]
    args = [str(tmp_path / "no-such-server.js"), "--api-key", secrets[0], f"--token={secrets[1]}", f"KEY={secrets[2]}"]
    config = write_config(tmp_path, [{"id": "leaky", "command": "node", "args": args}], planner={"provider": "offline"})
    done = agentify(
        "doctor", "--config", str(config), "--log-level", "DEBUG", env={"AGENTIFY_CACHE_DIR": str(tmp_path)}
    )
    assert done.returncode == 1
    assert "starting (stdio): node" in done.stderr, done.stderr
    assert not [s for s in secrets if s in done.stdout + done.stderr], done.stdout + done.stderr
