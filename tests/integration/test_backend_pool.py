"""A backend's sessions leased one call at a time (docs/backends.md, "Calls that overlap"): two people's calls
to one stdio backend on a team gateway each get their own questions and logs, on a process of their own.

The gateway is a subprocess with a tokens file and two people; the clients are the SDK's, in both eras; the
backends are real stdio servers (tests/fakes/asking_backend.py, tests/fakes/mcp_backend.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import REPO, fake_backend, pid_alive, text_of, wait_until, write_config
from tests.integration.ide_client import LOGGED_MODES, MODES, answering
from tests.integration.team import add_token, http_client, http_gateway
from tests.integration.test_backend_logs import Logs
from tests.servers import free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ASKING = REPO / "tests/fakes/asking_backend.py"


def team_config(tmp_path: Path, backend: dict[str, Any]) -> Path:
    server = {"auth": {"type": "tokens", "file": "tokens.json"}}
    return write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)


async def call(client: Any, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert isinstance(result, types.CallToolResult), result
    return text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_two_peoples_overlapping_calls_to_one_stdio_backend_each_get_their_own_question(
    tmp_path: Path, mode: str
) -> None:
    """The backend asks by request (a 2025-11-25 session, where nothing on stdio says which call asks): while
    Bob has a call in flight, Alice and Bob each call a tool that asks; each is asked their own question only,
    and each answer reaches their own call."""
    backend = {"id": "ask", "command": sys.executable, "args": [str(ASKING), "--era", "legacy"]}
    await each_gets_their_own_question(tmp_path, mode, backend)


async def test_over_streamable_http_too_each_overlapping_call_gets_its_own_question(tmp_path: Path) -> None:
    """The SDK's HTTP client does not say on which call's stream a backend's request came, so a remote backend's
    calls that overlap get sessions of their own as well."""
    port = free_port()
    argv = [sys.executable, str(ASKING), "--era", "legacy", "--port", str(port)]
    with server_process(argv, tmp_path / "backend.log"):
        await wait_accepting(port)
        await each_gets_their_own_question(tmp_path, "legacy", {"id": "ask", "url": f"http://127.0.0.1:{port}/mcp"})


async def each_gets_their_own_question(tmp_path: Path, mode: str, backend: dict[str, Any]) -> None:
    config = team_config(tmp_path, backend)
    alice_token = await add_token(tmp_path / "tokens.json", "alice")
    bob_token = await add_token(tmp_path / "tokens.json", "bob")
    alice_seen: list[types.ElicitRequestParams] = []
    bob_seen: list[types.ElicitRequestParams] = []
    results: dict[str, str] = {}

    async def run(client: Any, who: str, name: str, arguments: dict[str, Any]) -> None:
        results[who] = await call(client, name, arguments)

    with anyio.fail_after(150):
        async with (
            http_gateway(config, tmp_path / "e.log") as gateway,
            http_client(gateway.url, alice_token, mode, elicitation_callback=answering("accept", alice_seen)) as alice,
            http_client(gateway.url, bob_token, mode, elicitation_callback=answering("decline", bob_seen)) as bob,
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, bob, "bob-wait", "ask__wait", {"seconds": 6})
                await anyio.sleep(1.5)  # Bob's first call is in flight on the backend
                tg.start_soon(run, alice, "alice", "ask__confirm", {"path": "alice.txt"})
                tg.start_soon(run, bob, "bob", "ask__confirm", {"path": "bob.txt"})
    assert results["alice"] == "deleted alice.txt", results
    assert results["bob"] == "kept (decline) bob.txt", results
    assert results["bob-wait"].startswith("waited"), results
    assert alice_seen and all("alice.txt" in p.message and "bob.txt" not in p.message for p in alice_seen)
    assert bob_seen and all("bob.txt" in p.message and "alice.txt" not in p.message for p in bob_seen)


@pytest.mark.parametrize("mode", LOGGED_MODES)
async def test_a_backends_logs_during_overlapping_calls_reach_the_caller_only_and_its_extra_process_stops(
    tmp_path: Path, mode: str
) -> None:
    """Bob keeps a call open while Alice's call logs: Alice gets her call's message, Bob never does; the extra
    process that carried Alice's call is shown in list_backends and is gone once the gateway stopped."""
    config = team_config(tmp_path, fake_backend(protocol="2025-11-25"))
    alice_token = await add_token(tmp_path / "tokens.json", "alice")
    bob_token = await add_token(tmp_path / "tokens.json", "bob")
    alice_logs, bob_logs = Logs(), Logs()
    log = {"count": 1, "level": "error", "message": "alice-private"}
    with anyio.fail_after(150):
        async with (
            http_gateway(config, tmp_path / "e.log", {"AGENTIFY_LOG_LEVEL": "INFO"}) as gateway,
            http_client(gateway.url, alice_token, mode, logging_callback=alice_logs.heard) as alice,
            http_client(gateway.url, bob_token, mode, logging_callback=bob_logs.heard) as bob,
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, bob, "fake__slow", {"seconds": 5})
                await anyio.sleep(1.5)
                logged = await call(alice, "fake__log", log)
                listed = await alice.call_tool("list_backends", {})
            for client, logs in ((alice, alice_logs), (bob, bob_logs)):
                await call(client, "fake__log", {"count": 1, "level": "error", "message": "the end"})
                await logs.until("the end")
    assert logged == "logged 1"
    assert [entry.data for entry in alice_logs] == ["alice-private", "the end"]
    assert [entry.data for entry in bob_logs] == ["the end"]
    assert listed.structured_content is not None
    (status,) = listed.structured_content["backends"]
    assert status["state"] == "ready" and len(status["extraPids"]) == 1, status
    assert not pid_alive(status["pid"]) and not pid_alive(status["extraPids"][0])


async def test_a_link_returned_by_a_call_on_an_extra_process_makes_its_backend_the_uris_owner_for_the_caller(
    tmp_path: Path,
) -> None:
    """Bob keeps the backend's own process busy; Alice's call that links to a URI nobody lists runs on an extra
    process, and her read of the URI is answered by that backend, as it would be from its own process."""
    backends = [fake_backend("demo", "--resources", "demo://honest"), fake_backend("linker", "--resources", "lk://x")]
    config = write_config(
        tmp_path, backends, planner={"provider": "offline"}, server={"auth": {"type": "tokens", "file": "tokens.json"}}
    )
    alice_token = await add_token(tmp_path / "tokens.json", "alice")
    bob_token = await add_token(tmp_path / "tokens.json", "bob")
    with anyio.fail_after(120):
        async with (
            http_gateway(config, tmp_path / "e.log") as gateway,
            http_client(gateway.url, alice_token, "legacy") as alice,
            http_client(gateway.url, bob_token, "legacy") as bob,
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, bob, "linker__slow", {"seconds": 4})
                await anyio.sleep(1.5)
                await call(alice, "linker__link", {"uri": "demo://unlisted/1"})
                listed = await alice.call_tool("list_backends", {})
                read = await alice.read_resource("demo://unlisted/1")
    assert listed.structured_content is not None
    linker = next(b for b in listed.structured_content["backends"] if b["id"] == "linker")
    assert len(linker["extraPids"]) == 1, linker  # Alice's call did run on an extra process
    assert "".join(c.text for c in read.contents if isinstance(c, types.TextResourceContents)) == (
        "lk://x reads demo://unlisted/1"
    )


async def test_an_extra_process_stops_when_idle_and_a_later_overlap_starts_one_again(tmp_path: Path) -> None:
    config = team_config(tmp_path, fake_backend(idleStopSeconds=2))
    alice_token = await add_token(tmp_path / "tokens.json", "alice")
    bob_token = await add_token(tmp_path / "tokens.json", "bob")

    async def overlap(alice: Any, bob: Any) -> dict[str, Any]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, bob, "fake__slow", {"seconds": 3})
            await anyio.sleep(1.5)
            await call(alice, "fake__echo", {"text": "hi"})
            listed = await alice.call_tool("list_backends", {})
        assert listed.structured_content is not None
        status: dict[str, Any] = listed.structured_content["backends"][0]
        return status

    with anyio.fail_after(120):
        async with (
            http_gateway(config, tmp_path / "e.log") as gateway,
            http_client(gateway.url, alice_token, "auto") as alice,
            http_client(gateway.url, bob_token, "auto") as bob,
        ):
            first = await overlap(alice, bob)
            (extra,) = first["extraPids"]
            await wait_until(lambda: not pid_alive(extra), 20)  # idle for idleStopSeconds: stopped
            second = await overlap(alice, bob)
    assert len(second["extraPids"]) == 1 and second["extraPids"] != [extra]
