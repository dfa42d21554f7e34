"""The arbigent runner as the gateway's test-runner backend, with the fake arbigent CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
    return {
        "id": "arbigent",
        "command": str(AGENTIFY),
        "args": args,
        "description": "Arbigent end-to-end tests of the example shopping app",
        "env": {"OPENAI_API_KEY": "sk-arbigent-test-0000000000", "FAKE_ARBIGENT_RECORD": record} | env,
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
