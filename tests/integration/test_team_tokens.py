"""server.auth type `tokens`: each person has a token of their own, made by `agentify token add`; the
gateway knows them by name (traces, logs), never shows a token, and takes an added or removed token
into account without a restart. Driven by the official Python and TypeScript clients over HTTP."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import AGENTIFY, fake_backend, text_of, wait_until, write_config
from tests.integration.ide_client import ts_client
from tests.integration.team import (
    add_token,
    http_client,
    http_gateway,
    initialize,
    token_command,
    traces_of,
)
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def team_config(tmp_path: Path, **server: Any) -> Path:
    return write_config(
        tmp_path,
        [fake_backend("fake")],
        planner={"provider": "offline"},
        traceFile="traces.jsonl",
        server={"auth": {"type": "tokens", "file": "tokens.json"}} | server,
    )


def echo(text: str) -> dict[str, Any]:
    return {"name": "fake__echo", "arguments": {"text": text}}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver().start()
    yield server
    server.stop()


def task_spans(receiver: OtlpReceiver) -> dict[str, ReceivedSpan]:
    return {s.trace_id: s for s in receiver.snapshot()[0] if "agentify.task.kind" in s.attributes}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_people_with_their_own_tokens_appear_as_themselves(
    tmp_path: Path, mode: str, receiver: OtlpReceiver
) -> None:
    config = team_config(tmp_path)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    assert alice != bob and alice.startswith("agt_")
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    async with http_gateway(config, tmp_path / "e.log", otel) as gateway:
        async with http_client(gateway.url, alice, mode) as client:
            result = await client.call_tool("call_tool", echo("from alice"))
        calls = [{"name": "call_tool", "arguments": echo("from bob")}]
        answer = await ts_client({"url": gateway.url, "token": bob, "mode": mode, "elicitation": None, "calls": calls})
        stranger = await anyio.to_thread.run_sync(initialize, gateway.url, "agt_not-a-token-of-anyone-here")
    assert stranger.status == 401
    assert text_of(result) == "echo: from alice"
    assert answer["results"][0]["content"][0]["text"] == "echo: from bob"
    by_input = {t["input"]["arguments"]["text"]: t["principal"] for t in traces_of(tmp_path / "traces.jsonl")}
    assert by_input == {"from alice": "alice", "from bob": "bob"}
    log = gateway.log()
    assert "principal=alice" in log and "principal=bob" in log
    assert alice not in log and bob not in log
    assert alice[4:] not in (tmp_path / "tokens.json").read_text()
    # The gateway flushed its exporter as it stopped: every span of each task names its person.
    await wait_until(lambda: len(task_spans(receiver)) == 2)
    spans = receiver.snapshot()[0]
    tasks = task_spans(receiver)
    for trace_id, task in tasks.items():  # the SDK's server span, the task's, the backend call's
        in_trace = {s.attributes.get("enduser.id") for s in spans if s.trace_id == trace_id}
        assert in_trace == {task.attributes["enduser.id"]}
    assert sorted(t.attributes["enduser.id"] for t in tasks.values()) == ["alice", "bob"]
    assert alice not in "\n".join(receiver.raw) and bob not in "\n".join(receiver.raw)


async def test_a_token_added_or_removed_takes_effect_without_a_restart(tmp_path: Path) -> None:
    config = team_config(tmp_path)
    tokens = tmp_path / "tokens.json"
    alice = await add_token(tokens, "alice")
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        carol = await add_token(tokens, "carol")
        assert (await anyio.to_thread.run_sync(initialize, gateway.url, carol)).status == 200
        removed = await token_command("remove", "alice", "--file", str(tokens))
        assert removed.returncode == 0, removed.stderr.decode()
        refused = await anyio.to_thread.run_sync(initialize, gateway.url, alice)
        tokens.write_text("{ not json")  # a broken file keeps the tokens read before
        still = await anyio.to_thread.run_sync(initialize, gateway.url, carol)
    assert refused.status == 401
    assert refused.body["error"] == "invalid_token"
    assert "not in this gateway's tokens file" in refused.body["error_description"]
    assert still.status == 200
    assert "is not JSON" in gateway.log()


async def test_token_add_stores_only_a_hash_and_refuses_a_taken_name(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token = await add_token(tokens, "alice", "mcp:tools")
    entries = json.loads(tokens.read_text())["tokens"]
    again = await token_command("add", "alice", "--file", str(tokens))
    listed = await token_command("list", "--file", str(tokens))
    unknown = await token_command("remove", "mallory", "--file", str(tokens))
    bad_name = await token_command("add", "alice smith", "--file", str(tokens))
    assert [e["name"] for e in entries] == ["alice"] and entries[0]["scopes"] == ["mcp:tools"]
    assert token not in tokens.read_text() and len(entries[0]["sha256"]) == 64
    assert stat.S_IMODE(os.stat(tokens).st_mode) == 0o600
    assert again.returncode == 2 and "already has a token" in again.stderr.decode()
    assert listed.stdout.decode() == "alice (scopes: mcp:tools)\n"
    assert unknown.returncode == 2 and "'mallory' has no token" in unknown.stderr.decode()
    assert bad_name.returncode == 2 and "is not a token name" in bad_name.stderr.decode()


async def test_token_without_a_file_says_how_to_name_one(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    done = await token_command("add", "alice", "--config", str(config))
    assert done.returncode == 2
    assert "Give --file F" in done.stderr.decode()
    assert done.stdout == b""


async def test_a_missing_tokens_file_stops_serve_with_what_to_do(tmp_path: Path) -> None:
    config = team_config(tmp_path)
    (tmp_path / "tokens.json").write_text('{"tokens": [{"name": "alice"}]}')
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(AGENTIFY), "serve", "--transport", "http", "--port", "0", "--config", str(config)],
            check=False,
        )
    assert done.returncode != 0
    assert "sha256 must be 64 lowercase hex digits" in done.stderr.decode()
