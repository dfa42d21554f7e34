"""Isolation between people on one team gateway (DESIGN.md, "Who may do what", the isolation paragraph): what
one person does never locks another out. Two people with their own tokens (`agentify token add`), the
gateway as a subprocess, raw HTTP where the status is the point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.conftest import fake_backend, write_config
from tests.integration.team import Answer, add_token, http_gateway, initialize, request, token_command

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
                with anyio.fail_after(15):  # the stream is cut: Bob hears nothing more
                    try:
                        async for _ in stream.aiter_bytes():
                            pass
                    except httpx2.RemoteProtocolError:
                        pass  # ended mid-stream, as a connection the gateway closes
        carol = await add_token(tokens, "carol")
        carols = await opened(gateway.url, carol)
    assert alices.status == 200 and carols.status == 200
