"""Every failure becomes an isError result with its code, and the gateway keeps serving."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from tests.conftest import (
    API_KEY,
    ENV_SECRET,
    echo_works,
    error_code,
    fake_backend,
    fs_backend,
    gateway,
    gateway_env,
    pid_alive,
    text_of,
    wait_until,
    write_config,
)
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def wait_for_state(session: Any, backend_id: str, state: str) -> None:
    with anyio.fail_after(15):
        while True:
            listing = await session.call_tool("list_backends", {})
            backend = next(b for b in (listing.structured_content or {})["backends"] if b["id"] == backend_id)
            if backend["state"] == state:
                return
            await anyio.sleep(0.05)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": 5},
        {"query": "x", "context": "not an object"},
        {"query": "x", "unexpected": True},
        {"query": "q" * 200_000},
    ],
    ids=["missing", "empty", "blank", "number", "bad-context", "unknown-key", "200kB"],
)
async def test_bad_input_is_invalid_input_and_gateway_keeps_serving(
    tmp_path: Path, model: ModelServer, arguments: dict[str, Any]
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", arguments)
        assert result.is_error and error_code(result) == "invalid_input", text_of(result)
        assert "query" in text_of(result)
        await echo_works(session, model)
    assert model.requests and all("q" * 1000 not in m for m in model.user_messages())


async def test_model_without_tool_call_is_no_plan_with_its_words(tmp_path: Path, model: ModelServer) -> None:
    model.push(Reply.text("I cannot book flights with these tools."))
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "book a flight"})
        assert error_code(result) == "no_plan"
        assert "I cannot book flights with these tools." in text_of(result)
        await echo_works(session, model)


async def test_unknown_tool_or_still_invalid_arguments_is_invalid_plan(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__teleport", {}))
        unknown = await session.call_tool("orchestrate_task", {"query": "teleport"})
        model.push(Reply.tool_call("fake__echo", {"txt": 1}), Reply.tool_call("fake__echo", {"text": 2}))
        invalid = await session.call_tool("orchestrate_task", {"query": "echo"})
        await echo_works(session, model)
    assert error_code(unknown) == "invalid_plan" and "fake__teleport" in text_of(unknown)
    assert error_code(invalid) == "invalid_plan" and "text" in text_of(invalid)


async def test_no_api_key_is_an_offline_refusal_saying_how_to_configure_with_candidates(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(None), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "echo hi"})
    assert error_code(result) == "no_plan"
    assert "OPENAI_API_KEY" in text_of(result) and "cannot fill `text`" in text_of(result)
    candidates = (result.meta or {})["agentify/error"]["candidates"]
    assert len(candidates) == 3 and candidates[0]["name"] == "fake__echo"


@pytest.mark.parametrize("status", [500, 503])
async def test_model_server_errors_are_retried_then_planner_error(
    tmp_path: Path, model: ModelServer, status: int
) -> None:
    model.router = lambda body: Reply.error(status, "the model is on fire")
    config = write_config(tmp_path, [fake_backend()], planner={"maxRetries": 2})
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "echo hi"})
        assert error_code(result) == "planner_error", text_of(result)
        assert "the model is on fire" in text_of(result)
        assert len(model.requests) == 3  # the first try and two retries
        model.router = None
        await echo_works(session, model)


async def test_unreachable_model_endpoint_is_planner_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()], planner={"maxRetries": 0})
    env = gateway_env(None, OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    async with gateway(config, env, tmp_path / "stderr.log") as session:
        result = await session.call_tool("orchestrate_task", {"query": "echo hi"})
    assert error_code(result) == "planner_error" and "OPENAI_BASE_URL" in text_of(result)


async def test_backend_that_never_starts_is_reported_and_others_work(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend("broken", "--exit-at-start"), fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        listing = await session.call_tool("list_backends", {})
    states = {b["id"]: b for b in (listing.structured_content or {})["backends"]}
    assert states["broken"]["state"] in ("failed", "restarting") and states["fake"]["state"] == "ready"
    assert "exited with code 3" in states["broken"]["lastError"]
    assert "cannot open the database" in states["broken"]["lastError"]
    assert "fake__echo" in {t["function"]["name"] for t in model.requests[0]["tools"]}


async def test_backend_that_failed_its_first_start_is_tried_again_on_a_later_task(
    tmp_path: Path, model: ModelServer
) -> None:
    refuse = tmp_path / "refuse-start"
    refuse.touch()
    config = write_config(tmp_path, [fake_backend("late", "--refuse-if", str(refuse)), fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await wait_for_state(session, "late", "failed")
        refuse.unlink()
        await echo_works(session, model)  # any task: the planner could never pick the tool-less backend
        await wait_for_state(session, "late", "ready")


async def test_backend_that_cannot_restart_is_backend_unavailable(tmp_path: Path, model: ModelServer) -> None:
    refuse = tmp_path / "refuse-start"
    config = write_config(tmp_path, [fake_backend("fake", "--refuse-if", str(refuse), startupTimeoutSeconds=5)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        listing = await session.call_tool("list_backends", {})
        pid = (listing.structured_content or {})["backends"][0]["pid"]
        refuse.touch()
        os.killpg(pid, signal.SIGKILL)
        await wait_for_state(session, "fake", "failed")
        model.push(Reply.tool_call("fake__echo", {"text": "x"}))
        result = await session.call_tool("orchestrate_task", {"query": "echo x"})
        assert error_code(result) == "backend_unavailable", text_of(result)
        assert "cannot open the database" in text_of(result)
        refuse.unlink()
        model.push(Reply.tool_call("fake__echo", {"text": "still here"}))
        with anyio.fail_after(60):
            while (result := await session.call_tool("orchestrate_task", {"query": "echo"})).is_error:
                model.push(Reply.tool_call("fake__echo", {"text": "still here"}))
                await anyio.sleep(0.2)
        assert text_of(result) == "echo: still here"


async def test_backend_hanging_in_initialize_fails_after_its_startup_timeout(
    tmp_path: Path, model: ModelServer
) -> None:
    config = write_config(
        tmp_path, [fake_backend("stuck", "--hang-initialize", startupTimeoutSeconds=1), fake_backend()]
    )
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        # A backend that failed before it was ever ready is tried again (after its backoff) when a task
        # looks for tools: each attempt ends failed, with the reason.
        for _ in range(300):  # bounded: the state is the gateway's, polled as a client would
            stuck = await _backend(session, "stuck")
            if stuck["state"] == "failed":
                break
            await anyio.sleep(0.1)
    assert stuck["state"] == "failed" and "within 1 s" in stuck["lastError"]


async def test_hanging_tool_call_times_out_and_next_call_works(tmp_path: Path, model: ModelServer) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), timeoutSeconds=1)])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__slow", {"seconds": 30}))
        with anyio.fail_after(20):
            result = await session.call_tool("orchestrate_task", {"query": "wait long"})
        assert error_code(result) == "timeout" and "timeoutSeconds" in text_of(result)
        await echo_works(session, model)
    assert "cancelled slow" in marker.read_text()


async def test_backend_killed_mid_session_is_restarted_on_next_call(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        listing = await session.call_tool("list_backends", {})
        pid = (listing.structured_content or {})["backends"][0]["pid"]
        os.killpg(pid, signal.SIGKILL)
        await wait_until(lambda: not pid_alive(pid))
        await wait_for_state(session, "fake", "failed")
        await echo_works(session, model)
        listing = await session.call_tool("list_backends", {})
    backend = (listing.structured_content or {})["backends"][0]
    assert backend["state"] == "ready" and backend["restarts"] == 1 and backend["pid"] != pid


async def test_backend_crashing_during_a_call_is_backend_error_then_recovers(
    tmp_path: Path, model: ModelServer
) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__crash", {}))
        result = await session.call_tool("orchestrate_task", {"query": "crash"})
        assert error_code(result) == "backend_error", text_of(result)
        assert "exited during the call" in text_of(result) and "exit code 7" in text_of(result)
        await echo_works(session, model)


async def test_cancel_from_client_reaches_backend(tmp_path: Path, model: ModelServer) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker))])
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("fake.slow"):
            started.set()

    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__slow", {"seconds": 30}))
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await session.call_tool("orchestrate_task", {"query": "wait"}, progress_callback=on_progress)

            tg.start_soon(call)
            with anyio.fail_after(20):
                await started.wait()
            tg.cancel_scope.cancel()
        await wait_until(lambda: "cancelled slow" in marker.read_text())
        await echo_works(session, model)
    # The person reading the gateway's log sees that the task ended, and why.
    assert "task cancelled by the client" in (tmp_path / "stderr.log").read_text()


async def test_tools_list_changed_refreshes_the_backend_tools(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("fake__grow", {}))
        assert not (await session.call_tool("orchestrate_task", {"query": "grow"})).is_error
        with anyio.fail_after(10):
            while True:
                listing = await session.call_tool("list_backends", {})
                if "grown0" in (listing.structured_content or {})["backends"][0]["tools"]:
                    break
                await anyio.sleep(0.05)
        model.push(Reply.tool_call("fake__grown0", {}))
        result = await session.call_tool("orchestrate_task", {"query": "use the new tool"})
    assert error_code(result) != "invalid_plan"
    assert any(t["function"]["name"] == "fake__grown0" for t in model.requests[-1]["tools"])


def _marker_pids(marker: Path, kind: str) -> list[int]:
    return [int(line.split()[1]) for line in marker.read_text().splitlines() if line.startswith(kind + " ")]


async def test_closing_stdin_leaves_no_backend_process_or_child(
    tmp_path: Path, model: ModelServer, workspace: Path
) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(
        tmp_path, [fake_backend("fake", "--marker", str(marker), "--spawn-child"), fs_backend(workspace)]
    )
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        listing = await session.call_tool("list_backends", {})
        pids = [b["pid"] for b in (listing.structured_content or {})["backends"]]
    pids += _marker_pids(marker, "child")
    gateway_pid = int(marker.read_text().split()[2])
    await wait_until(lambda: not any(pid_alive(p) for p in [*pids, gateway_pid]))
    assert len(pids) == 3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_shuts_down_every_backend_and_child(tmp_path: Path, model: ModelServer, signum: int) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), "--spawn-child")])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        await echo_works(session, model)
        backend_pid, gateway_pid = (int(x) for x in marker.read_text().split()[1:3])
        child_pid = _marker_pids(marker, "child")[0]
        os.kill(gateway_pid, signum)
        await wait_until(lambda: not any(pid_alive(p) for p in (gateway_pid, backend_pid, child_pid)))


async def test_no_secret_reaches_stderr_or_results(tmp_path: Path, model: ModelServer) -> None:
    stderr = tmp_path / "stderr.log"
    env_backend = fake_backend("fake", env={"SERVICE_TOKEN": ENV_SECRET})
    config = write_config(tmp_path, [env_backend])
    async with gateway(config, gateway_env(model), stderr) as session:
        model.push(Reply.tool_call("fake__echo", {"text": f"token {ENV_SECRET} and key {API_KEY}"}))
        echoed = await session.call_tool("orchestrate_task", {"query": f"echo my key {API_KEY}"})
        listing = await session.call_tool("list_backends", {})
    log = stderr.read_text()
    assert "fake.echo" in log or "fake__echo" in log or "echo" in log  # the log did record the task
    for secret in (API_KEY, ENV_SECRET):
        assert secret not in log
        assert secret not in text_of(echoed)
        assert secret not in str(echoed.meta)
        assert secret not in text_of(listing)
    assert any(h.get("authorization") == f"Bearer {API_KEY}" for h in model.headers)


async def test_initialization_options_supply_key_and_backends(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [])
    options = {
        "OPENAI_API_KEY": API_KEY,
        "backends": [fake_backend()],
        "logLevel": "debug",
    }
    env = gateway_env(None, OPENAI_BASE_URL=model.base_url)
    async with gateway(config, env, tmp_path / "stderr.log", init_options=options) as session:
        await echo_works(session, model)
    assert any(h.get("authorization") == f"Bearer {API_KEY}" for h in model.headers)


async def test_environment_key_beats_initialization_options_key(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend()])
    options = {"OPENAI_API_KEY": "sk-from-initialization-options-000000"}
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log", init_options=options) as session:
        await echo_works(session, model)
    assert {h.get("authorization") for h in model.headers} == {f"Bearer {API_KEY}"}


async def _backend(session: ClientSession, backend_id: str) -> dict[str, Any]:
    listing = await session.call_tool("list_backends", {})
    return next(b for b in (listing.structured_content or {})["backends"] if b["id"] == backend_id)
