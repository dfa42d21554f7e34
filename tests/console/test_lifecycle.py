"""When the console starts, where it listens and what it says at start, each with its own gateway."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.conftest import (
    AGENTIFY,
    fake_backend,
    fs_backend,
    gateway,
    gateway_env,
    pid_alive,
    text_of,
    wait_until,
    write_config,
)
from tests.console.conftest import (
    TOKEN,
    Console,
    console_gateway,
    console_url,
    free_port,
    make_workspace,
    silent_gateway,
)
from tests.fakes.model_server import ModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_random_token_is_made_per_start_and_only_its_start_line_shows_it(
    tmp_path: Path, scripted_model: ModelServer
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    stderr = tmp_path / "stderr.log"
    async with console_gateway(config, gateway_env(scripted_model), stderr) as console:
        assert len(console.token) >= 32 and console.token != TOKEN
        result = await console.post_task({"query": f"echo {console.token}"})
        assert result["content"][0]["text"] == "echo: [REDACTED]"
        logs = await console.get("/api/logs", params={"limit": 2000})
        async with console.websocket() as ws:
            snapshot = await ws.recv()
    assert stderr.read_text().count(console.token) == 1
    assert console.token not in json.dumps(logs) + str(snapshot)
    assert "plan: fake.echo" in json.dumps(logs)


@pytest.mark.parametrize("stdout", [subprocess.PIPE, subprocess.DEVNULL], ids=["stdout-pipe", "stdout-devnull"])
async def test_the_console_serves_from_the_start_before_any_client_speaks(tmp_path: Path, stdout: int) -> None:
    config = write_config(tmp_path, [fake_backend()])
    stderr = tmp_path / "stderr.log"
    async with silent_gateway(config, gateway_env(None), stderr, stdout=stdout) as console:
        status = await console.get("/api/status")
        async with console.http() as client:
            refused = await client.get("/api/status")
        backend = await console.wait_for_state("fake", "ready")  # the inspector starts the backends: nobody else will
        assert console.process is not None
        console.process.send_signal(signal.SIGTERM)  # a person's Ctrl-C or an IDE's stop, before the client spoke
        with anyio.fail_after(15):
            code = await console.process.wait()
    assert status["console"]["url"] == f"{console.url}/" and status["tasks"]["total"] == 0
    assert refused.status_code == 401
    assert stderr.read_text().count(console.token) == 1
    assert code == 0 and not pid_alive(backend["pid"])  # a clean stop, and its backend stopped with it


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_backend_restarts_when_the_console_asks_and_its_tools_are_called_from_there(
    tmp_path: Path, era: str
) -> None:
    backends = [
        fake_backend(protocol=era),
        fake_backend("later", start="lazy", protocol=era),
        fake_backend("off", enabled=False),
    ]
    config = write_config(tmp_path, backends)
    async with silent_gateway(config, gateway_env(None), tmp_path / "stderr.log") as console:
        before = await console.wait_for_state("fake", "ready")
        await console.wait_for_state("later", "idle")
        async with console.http() as client:
            asked = await client.post("/api/backends/fake/restart", headers=console.auth)
            started = await client.post("/api/backends/later/restart", headers=console.auth)
            disabled = await client.post("/api/backends/off/restart", headers=console.auth)
            unknown = await client.post("/api/backends/nope/restart", headers=console.auth)
            without_token = await client.post("/api/backends/fake/restart")
            approve = await client.post("/api/pins/fake/approve", headers=console.auth)
        pins = await console.get("/api/pins")
        after = await console.wait_for_state("fake", "ready")
        woken = await console.wait_for_state("later", "ready")
        async with console.http() as client:
            echo = {"name": "fake__echo", "arguments": {"text": "after the restart"}}
            echoed = (await client.post("/api/tools/call", json=echo, headers=console.auth)).json()
    assert echoed["content"] == [{"type": "text", "text": "echo: after the restart"}], echoed
    assert asked.status_code == 202 and asked.json()["state"] in ("restarting", "ready")
    assert after["pid"] != before["pid"] and after["restarts"] == 1 and after["lastError"] is None
    assert started.status_code == 202 and woken["pid"] is not None and woken["restarts"] == 0  # idle: just started
    assert disabled.status_code == 409 and "disabled in the config" in disabled.json()["detail"]
    assert unknown.status_code == 404 and "no backend 'nope'" in unknown.json()["detail"]
    assert without_token.status_code == 401
    assert pins == {"enabled": True, "tools": []}  # pinning: warn, and nothing changed
    assert approve.status_code == 404 and approve.json()["detail"] == "backend 'fake' has no changed tools to approve"


async def test_a_port_in_use_gives_a_warning_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    stderr = tmp_path / "stderr.log"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = gateway_env(None, AGENTIFY_DEBUG_PORT=str(port))
        async with gateway(config, env, stderr) as session:
            await wait_until(lambda: "debug console not started" in stderr.read_text())
            result = await session.call_tool("list_backends", {})
    assert "fake: ready" in text_of(result) or "fake: starting" in text_of(result)
    warning = next(line for line in stderr.read_text().splitlines() if "debug console not started" in line)
    assert "WARNING" in warning and f"127.0.0.1:{port}" in warning and "keeps serving" in warning
    assert console_url(stderr) is None


async def test_debug_port_in_initialization_options_starts_the_console(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    stderr = tmp_path / "stderr.log"
    port = free_port()
    env = gateway_env(None, AGENTIFY_DEBUG_TOKEN=TOKEN)
    async with gateway(config, env, stderr, init_options={"DEBUG_PORT": port}):
        await wait_until(lambda: console_url(stderr) is not None)
        console = Console(None, f"http://127.0.0.1:{port}", port, TOKEN, stderr)
        status = await console.get("/api/status")
        config_seen = await console.get("/api/config")
    assert status["console"]["url"] == f"http://127.0.0.1:{port}/"
    assert config_seen["debugPort"] == port


async def test_a_wildcard_debug_host_warns_and_answers_only_to_this_machine_names(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    stderr = tmp_path / "stderr.log"
    env = gateway_env(None, AGENTIFY_DEBUG_TOKEN=TOKEN)
    async with console_gateway(config, env, stderr, args=["--debug-host", "0.0.0.0"]) as console:
        async with console.http() as client:

            async def status(host: str, origin: str | None = None) -> int:
                headers = console.auth | {"Host": host} | ({"Origin": origin} if origin else {})
                return (await client.get("/api/status", headers=headers)).status_code

            port = console.port
            by_own_name = await status(f"{socket.gethostname()}:{port}")
            by_loopback = await status(f"127.0.0.1:{port}", origin=f"http://localhost:{port}")
            by_any_ip = await status(f"192.0.2.7:{port}")  # an address nobody configured
            by_foreign_name = await status(f"evil.example:{port}")
            from_any_ip = await status(f"127.0.0.1:{port}", origin=f"http://192.0.2.7:{port}")
    assert by_own_name == by_loopback == 200
    assert by_any_ip == by_foreign_name == 400
    assert from_any_ip == 403
    warning = next(line for line in stderr.read_text().splitlines() if "bound to 0.0.0.0" in line)
    assert "WARNING" in warning and "other machines can reach it" in warning


async def test_traces_in_the_trace_file_are_shown_again_after_a_restart(
    tmp_path: Path, scripted_model: ModelServer
) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    trace_file = tmp_path / "traces.jsonl"
    config = write_config(tmp_path, [fs_backend(workspace)], traceFile=str(trace_file))
    env = gateway_env(scripted_model, AGENTIFY_DEBUG_TOKEN=TOKEN)
    task = {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(workspace)}}
    async with console_gateway(config, env, tmp_path / "first.log") as first:
        trace_id = (await first.post_task(task))["_meta"]["agentify/plan"]["traceId"]
    async with console_gateway(config, env, tmp_path / "second.log") as second:
        trace = await second.get(f"/api/traces/{trace_id}")
        status = await second.get("/api/status")
    assert trace["status"] == "ok" and [s["name"] for s in trace["spans"]] == [
        "validate",
        "plan",
        "tools/call read_text_file",
    ]
    assert status["tasks"]["total"] == 0  # counts are of this start
    assert len(trace_file.read_text().splitlines()) == 1


async def test_without_the_console_extra_the_hint_names_the_distribution_to_install(tmp_path: Path) -> None:
    """Without fastapi (the `console` extra), the console is skipped with a hint a person can follow: the
    distribution is mcp-agentify (the PyPI name `agentify` is somebody else's package)."""
    missing = tmp_path / "no-console-extra" / "fastapi"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'fastapi'\", name='fastapi')\n")
    env = gateway_env(None) | {"PYTHONPATH": f"{missing.parent}:{gateway_env(None)['PYTHONPATH']}"}
    config = write_config(tmp_path, [fake_backend("fake")])
    stderr = tmp_path / "stderr.log"
    command = [str(AGENTIFY), "serve", "--config", str(config), "--debug-port", str(free_port())]
    with stderr.open("a") as errlog:
        process = await anyio.open_process(command, stdin=subprocess.PIPE, stderr=errlog, env=env)
        try:
            await wait_until(lambda: "debug console not started" in stderr.read_text(), 60)
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.fail_after(15):
                await process.wait()
    hint = next(line for line in stderr.read_text().splitlines() if "debug console not started" in line)
    assert "pip install 'mcp-agentify[console]'" in hint, hint
    assert "agentify[console]" not in hint.replace("mcp-agentify[console]", "")
