"""Isolation between people on one team gateway (DESIGN.md, "Who may do what", the isolation paragraph): what
one person does never locks another out. Two people with their own tokens (`agentify token add`), the
gateway as a subprocess, raw HTTP where the status is the point."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from tests.conftest import AGENTIFY, contents_text, fake_backend, write_config
from tests.integration.team import Answer, add_token, http_client, http_gateway, initialize, request, token_command

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def team_config(tmp_path: Path, **server: Any) -> Path:
    return write_config(
        tmp_path,
        [fake_backend("fake")],
        planner={"provider": "offline"},
        server={"auth": {"type": "tokens", "file": "tokens.json"}} | server,
    )


async def opened(url: str, token: str) -> Answer:
    return await anyio.to_thread.run_sync(initialize, url, token)


async def ended(url: str, token: str, session: str) -> Answer:
    return await anyio.to_thread.run_sync(lambda: request("DELETE", url, token, session=session))


def session_of(answer: Answer) -> str:
    return next(v for k, v in answer.headers.items() if k.lower() == "mcp-session-id")


async def test_one_person_at_the_session_cap_gets_429_and_the_others_open_theirs(tmp_path: Path) -> None:
    config = team_config(tmp_path, maxSessionsPerPrincipal=3)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        bobs = [await opened(gateway.url, bob) for _ in range(3)]
        over = await opened(gateway.url, bob)
        alices = await opened(gateway.url, alice)
        await ended(gateway.url, bob, session_of(bobs[0]))
        again = await opened(gateway.url, bob)
    assert [a.status for a in bobs] == [200, 200, 200]
    assert over.status == 429 and int(over.headers["retry-after"]) > 0
    assert "maxSessionsPerPrincipal" in over.body["error"]["message"] and "'bob'" in over.body["error"]["message"]
    assert alices.status == 200  # Bob's sessions cost Alice nothing
    assert again.status == 200  # a session ended makes room


async def test_opening_sessions_is_rate_limited_per_person(tmp_path: Path) -> None:
    config = team_config(tmp_path, sessionOpensPerMinute=4)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        statuses = []
        for _ in range(5):  # each ended at once: only the rate holds Bob back
            answer = await opened(gateway.url, bob)
            statuses.append(answer.status)
            if answer.status == 200:
                await ended(gateway.url, bob, session_of(answer))
        alices = await opened(gateway.url, alice)
    assert statuses == [200, 200, 200, 200, 429]
    assert alices.status == 200


async def test_a_removed_token_ends_its_persons_open_stream_and_session_by_the_next_request(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    config = team_config(tmp_path)
    alice = await add_token(tokens, "alice")
    bob = await add_token(tokens, "bob")
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        session = session_of(await opened(gateway.url, bob))
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await anyio.to_thread.run_sync(lambda: request("POST", gateway.url, bob, initialized, session=session))
        headers = {
            "Authorization": f"Bearer {bob}",
            "Accept": "text/event-stream",
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-11-25",
        }
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(5, read=None)) as http:
            async with http.stream("GET", gateway.url, headers=headers) as stream:
                assert stream.status_code == 200
                removed = await token_command("remove", "bob", "--file", str(tokens))
                assert removed.returncode == 0, removed.stderr.decode()
                alices = await opened(gateway.url, alice)  # the next request, anyone's, reads the file again
                with anyio.fail_after(15):  # the stream ends (a whole response): Bob hears nothing more
                    async for _ in stream.aiter_bytes():
                        pass
        carol = await add_token(tokens, "carol")
        carols = await opened(gateway.url, carol)
    assert alices.status == 200 and carols.status == 200


async def test_a_tokens_file_others_can_write_is_refused_at_start_and_at_reload(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    config = team_config(tmp_path)
    alice = await add_token(tokens, "alice")
    tokens.chmod(0o666)
    with anyio.fail_after(60):
        refused = await anyio.run_process(
            [str(AGENTIFY), "serve", "--transport", "http", "--port", "0", "--config", str(config)], check=False
        )
    tokens.chmod(0o600)
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        carol = await add_token(tokens, "carol")
        tokens.chmod(0o620)  # anyone of the group could have added carol
        while_writable = [(await opened(gateway.url, token)).status for token in (alice, carol)]
        tokens.chmod(0o600)
        once_private = (await opened(gateway.url, carol)).status
    assert refused.returncode != 0
    assert "can be written by other users (mode 666)" in refused.stderr.decode()
    assert "chmod 600" in refused.stderr.decode()
    assert while_writable == [200, 401]  # the tokens read before stay in use
    assert "can be written by other users (mode 620)" in gateway.log()
    assert once_private == 200


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_hostile_backends_link_answers_no_ones_reads_of_another_backends_uri(tmp_path: Path, mode: str) -> None:
    """Bob calls a backend's tool that links to URIs of another backend; Alice's reads, and his own, of what the
    other backend lists stay that backend's; a URI nobody lists is the linking backend's for Bob only."""
    backends = [fake_backend("demo", "--resources", "demo://honest"), fake_backend("evil", "--resources", "evil://x")]
    config = write_config(
        tmp_path, backends, planner={"provider": "offline"}, server={"auth": {"type": "tokens", "file": "tokens.json"}}
    )
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    link = {"name": "call_tool", "arguments": {"name": "evil__link", "arguments": {"uri": "demo://honest/doc"}}}
    unlisted = {"name": "evil__link", "arguments": {"uri": "demo://unlisted/1"}}
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        async with http_client(gateway.url, bob, mode) as bobs, http_client(gateway.url, alice, mode) as alices:
            linked = await bobs.call_tool(link["name"], link["arguments"])
            await bobs.call_tool("call_tool", unlisted)
            bob_reads = [contents_text(await bobs.read_resource(u)) for u in ("demo://honest/doc", "demo://unlisted/1")]
            alice_reads = [
                contents_text(await alices.read_resource(u)) for u in ("demo://honest/doc", "demo://unlisted/1")
            ]
    assert [str(b.uri) for b in linked.content if isinstance(b, types.ResourceLink)] == ["demo://honest/doc"]
    assert bob_reads == ["demo://honest reads demo://honest/doc", "evil://x reads demo://unlisted/1"]
    assert alice_reads == ["demo://honest reads demo://honest/doc", "demo://honest reads demo://unlisted/1"]


async def test_one_persons_open_streams_are_capped_and_the_others_get_in(tmp_path: Path) -> None:
    config = team_config(tmp_path, maxOpenRequestsPerPrincipal=2)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        sessions = [session_of(await opened(gateway.url, bob)) for _ in range(2)]
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=None)) as http, AsyncExitStack() as streams:
            for session in sessions:  # each session's stream of server messages, kept open
                headers = {"Authorization": f"Bearer {bob}", "Accept": "text/event-stream"}
                headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
                stream = await streams.enter_async_context(http.stream("GET", gateway.url, headers=headers))
                assert stream.status_code == 200
            over = await opened(gateway.url, bob)
            alices = await opened(gateway.url, alice)
        await anyio.sleep(0.5)  # the streams' ends reach the gateway
        after = await opened(gateway.url, bob)
    assert over.status == 429 and "maxOpenRequestsPerPrincipal" in over.body["error_description"]
    assert alices.status == 200
    assert after.status == 200
