"""The arbigent runner as the gateway's test-runner backend, with the fake arbigent CLI."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.arbigent.support import install_release
from tests.conftest import AGENTIFY, REPO, error_code, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

EXAMPLE = REPO / "examples/arbigent"


def arbigent_backend(tmp_path: Path, **env: str) -> dict[str, Any]:
    work = tmp_path / "arbigent-work"
    work.mkdir(exist_ok=True)
    args = ["arbigent", "--project", str(EXAMPLE / "arbigent-project.yaml")]
    args += ["--config", str(EXAMPLE / "arbigent-config.yaml")]
    args += ["--arbigent-bin-path", str(REPO / "tests/fakes/arbigent"), "--working-directory", str(work)]
    record = str(tmp_path / "record.jsonl")
    runtime = tmp_path / "runtime"  # the runner's private directory for run locks
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {
        "id": "arbigent",
        "command": str(AGENTIFY),
        "args": args,
        "description": "Arbigent end-to-end tests of the example shopping app",
        "env": {"OPENAI_API_KEY": "sk-arbigent-test-0000000000", "FAKE_ARBIGENT_RECORD": record}
        | {"XDG_RUNTIME_DIR": str(runtime)}
        | env,
        "timeoutSeconds": 120,
    }


def runs(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "record.jsonl").read_text().splitlines()
    return [entry for entry in map(json.loads, lines) if "argv" in entry]


async def test_run_the_login_tests_reaches_the_login_tag_tool(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [arbigent_backend(tmp_path)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("arbigent__run-arbigent-test-login", {}))
        result = await session.call_tool("orchestrate_task", {"query": "run the login tests"})
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"arbigent__run-arbigent-test-login", "arbigent__run-arbigent-test-all"} <= offered
    assert not result.is_error, text_of(result)
    argv = runs(tmp_path)[0]["argv"]
    assert argv[0] == "run" and "--tags=login" in argv
    assert f"--project-file={EXAMPLE / 'arbigent-project.yaml'}" in argv
    assert (result.structured_content or {})["status"] == "passed"
    assert (result.meta or {})["agentify/plan"]["tool"] == "run-arbigent-test-login"


async def test_a_failing_scenario_comes_back_as_an_error_naming_it(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [arbigent_backend(tmp_path, FAKE_ARBIGENT_FAIL="logout")])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("arbigent__run-arbigent-test-login", {}))
        result = await session.call_tool("orchestrate_task", {"query": "run the login tests"})
    assert result.is_error and error_code(result) is None  # the backend's own failure, passed through
    assert "logout" in text_of(result).splitlines()[0]
    scenarios = {s["id"]: s["success"] for s in (result.structured_content or {})["scenarios"]}
    assert scenarios["logout"] is False


def offline_backend(tmp_path: Path, **env: str) -> dict[str, Any]:
    """The runner as a gateway backend finding the fake `arbigent` on PATH, as an installed one would be."""
    backend = arbigent_backend(tmp_path, **env)
    backend["args"] = [
        a for a in backend["args"] if a != "--arbigent-bin-path" and not a.endswith("tests/fakes/arbigent")
    ]
    backend["env"] |= {"PATH": f"{REPO / 'tests/fakes'}:{os.environ['PATH']}"}
    return backend


async def test_check_that_is_run_as_an_ad_hoc_task_through_the_offline_planner(tmp_path: Path) -> None:
    config = write_config(tmp_path, [offline_backend(tmp_path)])
    query = "check that the login screen shows an error for a wrong password"
    async with gateway(config, gateway_env(None, AGENTIFY_PLANNER="offline"), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": query})
    assert not result.is_error, text_of(result)
    plan = (result.meta or {})["agentify/plan"]
    assert (plan["planner"], plan["tool"], plan["arguments"]) == ("offline", "run-arbigent-task", {"goal": query})
    [start] = runs(tmp_path)
    assert start["argv"][:2] == ["run", "task"] and start["argv"][-2:] == ["--", query]
    assert (result.structured_content or {})["scenarios"] == [{"id": "task", "success": True}]


async def test_a_failing_scenarios_image_and_resource_links_pass_through_the_gateway_unchanged(tmp_path: Path) -> None:
    config = write_config(tmp_path, [offline_backend(tmp_path, FAKE_ARBIGENT_FAIL="logout")])
    async with gateway(config, gateway_env(None, AGENTIFY_PLANNER="offline"), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "run the login tests"})
    assert result.is_error and error_code(result) is None, text_of(result)
    structured = result.structured_content or {}
    [shot] = structured["screenshots"]
    assert shot["scenarioId"] == "logout" and shot["attached"] is True
    [image] = [block for block in result.content if isinstance(block, types.ImageContent)]
    screenshot = tmp_path / "arbigent-work" / "arbigent-result" / "screenshots" / shot["uri"].rsplit("/", 1)[-1]
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == screenshot.read_bytes()
    links = [block for block in result.content if isinstance(block, types.ResourceLink)]
    prefix = f"arbigent://runs/{structured['runId']}/"
    assert [(link.uri, link.mime_type) for link in links] == [
        (prefix + "result.yml", "application/yaml"),
        (prefix + "report.html", "text/html"),
        (shot["uri"], "image/png"),
    ]
    assert [link.name for link in links] == [link.uri.removeprefix("arbigent://runs/") for link in links]


async def test_doctor_and_list_backends_say_which_arbigent_and_version_the_runner_uses(tmp_path: Path) -> None:
    """The gateway shows every backend's own server info; the runner's says which CLI it starts."""
    binary = install_release(tmp_path / "install", "0.77.0")
    backend = arbigent_backend(tmp_path)
    backend["args"][backend["args"].index("--arbigent-bin-path") + 1] = str(binary)
    config = write_config(tmp_path, [backend])
    async with gateway(config, gateway_env(None, AGENTIFY_PLANNER="offline"), tmp_path / "stderr.log") as session:
        with anyio.fail_after(30):
            while True:
                listed = await session.call_tool("list_backends", {})
                [status] = (listed.structured_content or {})["backends"]
                if status["state"] != "starting":
                    break
                await anyio.sleep(0.1)
    assert status["server"].startswith("agentify-arbigent ")
    assert status["server"].endswith(f": arbigent 0.77.0 ({binary})")
    assert f"[server: {status['server']}]" in text_of(listed)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    with anyio.fail_after(60):
        doctor = await anyio.run_process(
            [str(AGENTIFY), "doctor", "--config", str(config)],
            env=env | {"AGENTIFY_PLANNER": "offline"},
            stdin=subprocess.DEVNULL,
            check=False,
        )
    output = doctor.stdout.decode()
    assert doctor.returncode == 0, output + doctor.stderr.decode()
    lines = output.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("arbigent "))
    assert lines[row + 1].split() == ["server:", *status["server"].split()]
