"""Many clients on one HTTP gateway: each keeps its own workspace (roots), and the rate limits count
each person's calls, shared by every gateway on the same Redis."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_code, fake_backend, fs_backend, text_of, write_config
from tests.integration.ide_client import MODES, roots_of
from tests.integration.team import add_token, http_client, http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
TOKEN = "team-token-0123456789abcdef"


@pytest.mark.parametrize("mode", MODES)
async def test_three_clients_each_read_from_their_own_workspace(tmp_path: Path, mode: str) -> None:
    folders = []
    for name in ("ann", "ben", "cat"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "notes.txt").write_text(f"the notes of {name}\n")
        folders.append(folder)
    config = write_config(tmp_path, [fs_backend(tmp_path)], planner={"provider": "offline"})
    read = {"query": "read notes.txt"}
    async with http_gateway(config, tmp_path / "e.log", {"AGENTIFY_HTTP_TOKEN": TOKEN}) as gateway:
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(http_client(gateway.url, TOKEN, mode, list_roots_callback=roots_of(f)))
                for f in folders
            ]
            first = [text_of(await client.call_tool("orchestrate_task", read)) for client in clients]
            again = [text_of(await client.call_tool("orchestrate_task", read)) for client in reversed(clients)]
    assert first == ["the notes of ann\n", "the notes of ben\n", "the notes of cat\n"]
    assert again == first[::-1]


async def test_a_limit_stops_a_loop_across_gateways_sharing_redis(tmp_path: Path, redis: Any) -> None:
    limits = {"perPrincipal": "3/minute", "perBackend": {"fake": "5/minute"}}
    server = {"auth": {"type": "tokens", "file": "tokens.json"}, "redis": redis.url, "limits": limits}
    config = write_config(tmp_path, [fake_backend("fake")], planner={"provider": "offline"}, server=server)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    echo = {"name": "fake__echo", "arguments": {"text": "again"}}
    async with http_gateway(config, tmp_path / "one.log") as one, http_gateway(config, tmp_path / "two.log") as two:
        async with http_client(one.url, alice, "legacy") as client:
            alices = [await client.call_tool("call_tool", echo) for _ in range(2)]
        async with http_client(two.url, alice, "auto") as client:
            alices += [await client.call_tool("call_tool", echo) for _ in range(2)]
        async with http_client(two.url, bob, "auto") as client:
            bobs = [await client.call_tool("call_tool", echo) for _ in range(3)]
    assert [text_of(r) for r in alices[:3]] == ["echo: again"] * 3
    over = alices[3]
    assert error_code(over) == "rate_limited"
    assert "'alice' is over the limit of 3 per minute" in text_of(over)
    retry = (over.meta or {})["agentify/error"]["retryAfterSeconds"]
    assert 0 < retry <= 60 and f"Try again in {retry} s" in text_of(over)
    # alice's three calls and bob's first two reach the backend: its fifth is its last this minute
    assert [error_code(r) for r in bobs] == [None, None, "rate_limited"]
    assert "backend 'fake' is over its limit of 5 per minute" in text_of(bobs[2])
