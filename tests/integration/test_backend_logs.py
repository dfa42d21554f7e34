"""A backend's log messages through the gateway, as IDEs on either protocol era get them: at the level each
client asked for (never another client's), during a call on its stream (and outside calls over stdio, whose
one client is the user's), redacted, named for the backend, and bounded when the backend floods."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import AGENTIFY, ENV_SECRET, fake_backend, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, ide_client, ts_client
from tests.servers import free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class Logs(list[types.LoggingMessageNotificationParams]):
    """The log messages a client heard; `until` waits for one."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = anyio.Event()

    async def heard(self, params: types.LoggingMessageNotificationParams) -> None:
        self.append(params)
        self.arrived.set()
        self.arrived = anyio.Event()

    async def until(self, text: str, seconds: float = 20) -> None:
        """Waits (bounded) until a message with this text has come."""
        with anyio.fail_after(seconds):
            while not any(text in str(log.data) for log in self):
                await self.arrived.wait()


def log_call(count: int, level: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"name": "fake__log", "arguments": {"count": count, "level": level, "message": message, **extra}}


@pytest.mark.parametrize("mode", MODES)
async def test_a_backends_logs_during_a_call_reach_the_ide_at_its_level_masked_and_named(
    tmp_path: Path, mode: str
) -> None:
    """2025-11-25: the client's logging/setLevel; 2026-07-28: the level in each request's _meta."""
    config = write_config(tmp_path, [fake_backend(env={"FAKE_TOKEN": ENV_SECRET})])
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    logs = Logs()
    options: dict[str, Any] = {"logging_callback": logs.heard} | ({"log_level": "info"} if mode == "auto" else {})
    async with ide_client(config, env, tmp_path / "stderr.log", mode, **options) as client:
        assert client.server_capabilities.logging is not None
        if mode == "legacy":
            await client.set_logging_level("info")
        with anyio.fail_after(60):
            done = await client.call_tool("call_tool", log_call(3, "info", "using ", env="FAKE_TOKEN", logger="db"))
            await client.call_tool("call_tool", log_call(2, "debug", "too chatty"))
            await client.call_tool("call_tool", log_call(1, "warning", "last one"))
            await logs.until("last one")
    assert text_of(done) == "logged 3"
    assert [(log.level, log.logger) for log in logs] == [("info", "fake.db")] * 3 + [("warning", "fake")]
    assert all("using [REDACTED]" == log.data for log in logs[:3]), logs
    assert not any(ENV_SECRET in str(log) for log in logs)


@pytest.mark.parametrize("mode", MODES)
async def test_the_typescript_client_gets_a_backends_logs_in_either_era(tmp_path: Path, mode: str) -> None:
    """2025-11-25: logging/setLevel; 2026-07-28: the level in the call's own `_meta`, which it sets by hand."""
    config = write_config(tmp_path, [fake_backend()])
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")} | gateway_env(
        None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache")
    )
    calls = [log_call(2, "notice", "ts-notice"), log_call(1, "info", "ts-info")]
    spec = {"command": str(AGENTIFY), "args": ["serve", "--config", str(config)], "env": env, "mode": mode}
    spec |= {"stderrFile": str(tmp_path / "e.log"), "elicitation": None, "logLevel": "notice"}
    answer = await ts_client(spec | {"calls": [{"name": "call_tool", "arguments": c} for c in calls]})
    assert [r["content"][0]["text"] for r in answer["results"]] == ["logged 2", "logged 1"]
    assert [(log["level"], log["logger"], log["data"]) for log in answer["logs"]] == [
        ("notice", "fake", "ts-notice")
    ] * 2


@asynccontextmanager
async def http_gateway(tmp_path: Path, backends: list[dict[str, Any]], **env_extra: str) -> AsyncIterator[str]:
    port = free_port()
    config = write_config(tmp_path, backends)
    env = os.environ | gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), **env_extra)
    argv = [str(AGENTIFY), "serve", "--transport", "http", "--no-auth", "--port", str(port), "--config", str(config)]
    with server_process(argv, tmp_path / "gateway.log", env):
        await wait_accepting(port, 60)
        yield f"http://127.0.0.1:{port}/mcp"


async def legacy_session(stack: AsyncExitStack, url: str, logs: Logs) -> ClientSession:
    """A 2025-11-25 client of the HTTP gateway: its own MCP session."""
    http = await stack.enter_async_context(create_mcp_http_client())
    read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(read, write, logging_callback=logs.heard))
    await session.initialize()
    return session


async def test_over_http_each_session_gets_only_its_own_calls_logs_at_its_level_and_no_one_raises_the_backends(
    tmp_path: Path,
) -> None:
    """Two people on one gateway (a 2025-11-25 backend session shared by both): the backend stays at the
    gateway's own level whatever a client asks; each gets its own calls' messages at its own level, also while
    the other has a call in flight (each call has a session of its own); a message no call owns (sent after the
    call) reaches neither."""
    backend = fake_backend(protocol="2025-11-25")
    alice_logs, bob_logs = Logs(), Logs()
    with anyio.fail_after(120):
        async with http_gateway(tmp_path, [backend], AGENTIFY_LOG_LEVEL="INFO") as url, AsyncExitStack() as stack:
            alice = await legacy_session(stack, url, alice_logs)
            bob = await legacy_session(stack, url, bob_logs)
            await alice.set_logging_level("debug")
            await bob.set_logging_level("error")
            for session in (alice, bob):
                await session.call_tool("call_tool", log_call(1, "debug", "call-debug"))
                await session.call_tool("call_tool", log_call(1, "info", "call-info"))
                await session.call_tool("call_tool", log_call(1, "error", "call-error"))
            set_at = await alice.call_tool("call_tool", {"name": "fake__log_level", "arguments": {}})
            entries = [["info", "later-info"], ["error", "later-error"]]
            await bob.call_tool("call_tool", {"name": "fake__log_later", "arguments": {"entries": entries}})
            await anyio.sleep(1)  # the backend sends them a moment after the call
            async with anyio.create_task_group() as tg:  # Bob keeps a call open while Alice's call logs
                tg.start_soon(bob.call_tool, "call_tool", {"name": "fake__slow", "arguments": {"seconds": 3}})
                await anyio.sleep(1)
                await alice.call_tool("call_tool", log_call(1, "error", "alice-private"))
            for session, logs in ((alice, alice_logs), (bob, bob_logs)):
                await session.call_tool("call_tool", log_call(1, "error", "the end"))
                await logs.until("the end")
    assert text_of(set_at) == "info"  # the gateway's level, not Alice's debug
    assert [log.data for log in alice_logs] == ["call-info", "call-error", "alice-private", "the end"]
    assert [log.data for log in bob_logs] == ["call-error", "the end"]
    assert {log.logger for log in alice_logs + bob_logs} == {"fake"}


async def test_every_message_of_a_flood_reaches_the_ide_or_is_counted_as_dropped(tmp_path: Path) -> None:
    """A backend logging faster than the IDE reads: each message either arrives or is counted in a note that
    says how many were dropped (how many wait is bounded: tests/unit/test_log_relay.py)."""
    count = 20_000
    config = write_config(tmp_path, [fake_backend(timeoutSeconds=300)])
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), AGENTIFY_LOG_LEVEL="INFO")
    logs = Logs()
    async with ide_client(config, env, tmp_path / "stderr.log", "legacy", logging_callback=logs.heard) as client:
        await client.set_logging_level("info")
        with anyio.fail_after(240):
            done = await client.call_tool("call_tool", log_call(count, "info", "step"), read_timeout_seconds=240)
            await client.call_tool("call_tool", log_call(1, "info", "after the flood"))
            await logs.until("after the flood")
    assert text_of(done) == f"logged {count}"
    relayed = [log for log in logs if log.data == "step"]
    notes = [str(log.data) for log in logs if log.logger == "agentify"]
    dropped = sum(int(note.split()[0]) for note in notes)
    assert len(relayed) + dropped == count, (len(relayed), notes)
