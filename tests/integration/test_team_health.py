"""What a load balancer sees of one replica: /healthz and /readyz without a token and without secrets,
and the drain on SIGTERM: /readyz 503 at once, new MCP requests 503, calls in flight (both eras)
finish, a 2025-11-25 session the replica holds goes on until its client ends it, then the process exits."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentify.team.drain import QUIET_SECONDS
from agentify.team.tokens_file import digest
from tests.conftest import ENV_SECRET, fake_backend, text_of, wait_until, write_config
from tests.integration.team import http_client, http_gateway, initialize, request

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
TOKEN = "team-token-0123456789abcdef"
ENV = {"AGENTIFY_HTTP_TOKEN": TOKEN}


async def test_health_and_readiness_need_no_token_and_show_no_secret(tmp_path: Path) -> None:
    backends = [
        fake_backend("fake", env={"API_TOKEN": ENV_SECRET}),
        fake_backend("broken", "--exit-at-start", env={"API_TOKEN": ENV_SECRET}),
    ]
    config = write_config(tmp_path, backends, planner={"provider": "offline"})
    async with http_gateway(config, tmp_path / "e.log", ENV) as gateway:
        health = await anyio.to_thread.run_sync(request, "GET", gateway.at("/healthz"))
        await wait_until(lambda: "broken" in request("GET", gateway.at("/readyz")).body.get("backends", {}), 30)
        ready = await anyio.to_thread.run_sync(request, "GET", gateway.at("/readyz"))
        mcp = await anyio.to_thread.run_sync(initialize, gateway.url, None)
    assert health.status == 200 and health.body == {"status": "ok"}
    assert ready.status == 503, ready
    assert ready.body["status"] == "not_ready"
    assert ready.body["backends"]["fake"] in ("starting", "ready")
    assert ready.body["backends"]["broken"] in ("starting", "failed", "restarting")
    assert ENV_SECRET not in str(ready.body) and TOKEN not in str(ready.body)
    assert mcp.status == 401  # the health routes are open, MCP is not


async def test_readyz_is_200_once_every_eager_backend_is_ready(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")], planner={"provider": "offline"})
    async with http_gateway(config, tmp_path / "e.log", ENV) as gateway:
        await wait_until(lambda: request("GET", gateway.at("/readyz")).status == 200, 30)
        ready = await anyio.to_thread.run_sync(request, "GET", gateway.at("/readyz"))
    assert ready.body == {"status": "ready", "backends": {"fake": "ready"}}


async def test_sigterm_drains_calls_in_flight_of_both_eras_and_held_sessions_then_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend("fake")], planner={"provider": "offline"})
    slow = {"name": "fake__slow", "arguments": {"seconds": 4}}
    results: dict[str, Any] = {}
    async with http_gateway(config, tmp_path / "e.log", ENV) as gateway:
        await wait_until(lambda: request("GET", gateway.at("/readyz")).status == 200, 30)
        started = {mode: anyio.Event() for mode in ("legacy", "auto")}

        async def call_in_flight(mode: str) -> None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                started[mode].set()

            async with http_client(gateway.url, TOKEN, mode) as client:
                await client.list_tools()  # as IDEs do first; the SDK would list them after the result otherwise
                results[mode] = await client.call_tool("call_tool", slow, progress_callback=progress)
                if mode == "legacy":  # its session lives on this replica only: it goes on while draining
                    parent = {"name": "fake__parent", "arguments": {}}
                    results["legacy follow-up"] = await client.call_tool("call_tool", parent)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for mode in started:
                    tg.start_soon(call_in_flight, mode)
                for event in started.values():
                    await event.wait()  # the backend is working on both calls
                gateway.process.send_signal(signal.SIGTERM)
                await wait_until(lambda: request("GET", gateway.at("/readyz")).status == 503, 5)
                ready = await anyio.to_thread.run_sync(request, "GET", gateway.at("/readyz"))
                newcomer = await anyio.to_thread.run_sync(initialize, gateway.url, TOKEN)
                stranger = await anyio.to_thread.run_sync(initialize, gateway.url, None)
                assert gateway.process.returncode is None  # still serving the calls in flight
            await gateway.process.wait()
    assert ready.body == {"status": "draining"}
    assert newcomer.status == 503 and newcomer.body["error"] == "draining"
    assert stranger.status == 401  # the token is checked before the drain reads a body
    headers = {name.lower(): value for name, value in newcomer.headers.items()}
    assert headers["retry-after"] == "1" and headers["connection"] == "close"
    for mode in ("legacy", "auto"):
        assert not results[mode].is_error, text_of(results[mode])
        assert text_of(results[mode]) == "slept 4.0", mode
    follow_up = results["legacy follow-up"]
    assert not follow_up.is_error and text_of(follow_up).isdigit(), text_of(follow_up)
    assert gateway.process.returncode == 0


async def test_a_session_id_used_by_someone_else_does_not_end_the_drain_early(tmp_path: Path) -> None:
    """The SDK answers 404 to a token that did not open the session; the session goes on, and so does the
    drain that waits for it, until its own client ends it."""
    tokens = tmp_path / "tokens.json"  # as `agentify token add` writes it (test_team_tokens runs that command)
    alice, bob = "agt_alice-token-0123456789abcdef", "agt_bob-token-0123456789abcdef"
    entries = [{"name": name, "sha256": digest(token)} for name, token in (("alice", alice), ("bob", bob))]
    tokens.write_text(json.dumps({"tokens": entries}))
    server = {"auth": {"type": "tokens", "file": str(tokens)}}
    config = write_config(tmp_path, [fake_backend("fake")], planner={"provider": "offline"}, server=server)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        opened = await anyio.to_thread.run_sync(initialize, gateway.url, alice)
        session = opened.headers.get("mcp-session-id") or opened.headers["Mcp-Session-Id"]
        posted = await anyio.to_thread.run_sync(lambda: request("POST", gateway.url, bob, ping, session=session))
        deleted = await anyio.to_thread.run_sync(lambda: request("DELETE", gateway.url, bob, session=session))
        gateway.process.send_signal(signal.SIGTERM)
        await wait_until(lambda: request("GET", gateway.at("/readyz")).status == 503, 5)
        # Nothing must happen here (the drain must not end), which only waiting shows: past its quiet time.
        await anyio.sleep(QUIET_SECONDS * 3)
        still_serving = gateway.process.returncode is None
        hers = await anyio.to_thread.run_sync(lambda: request("POST", gateway.url, alice, ping, session=session))
        ended = await anyio.to_thread.run_sync(lambda: request("DELETE", gateway.url, alice, session=session))
        with anyio.fail_after(20):
            await gateway.process.wait()
    assert posted.status == 404 and deleted.status == 404
    assert still_serving
    assert hers.status == 200 and hers.body.get("result") == {}, hers
    assert ended.status == 200 and gateway.process.returncode == 0
