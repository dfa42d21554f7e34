"""`server.audit` and `GET /metrics` of a team gateway: two people with their own tokens drive
`agentify serve --transport http` (a subprocess) with the official client in either protocol era; the
audit file, `agentify audit verify`, the OTLP logs a real receiver got and the Prometheus text are what
is checked."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import AGENTIFY, fake_backend, gateway_env, text_of, wait_until, write_config
from tests.integration.cluster import team
from tests.integration.ide_client import MODES, answering
from tests.integration.team import add_token, http_client, http_gateway, request
from tests.otlp_receiver import OtlpReceiver
from tests.servers import EVERYTHING, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ALICE_SECRET = "alice-private-argument-7f3a"
BOB_SECRET = "bob-private-argument-91c2"
CITY = "Lisbon-argument-5d1e"
TASK = {"query": "show the pid of the parent process"}  # fake__parent: no other tool fits


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver().start()
    yield server
    server.stop()


def audited_config(tmp_path: Path, **server: Any) -> Path:
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run scripts/setup.sh (npm install) first")
    everything = {"id": "everything", "command": "node", "args": [str(EVERYTHING), "stdio"]}
    return write_config(
        tmp_path,
        [fake_backend("fake"), everything],
        planner={"provider": "offline"},
        server={
            "auth": {"type": "tokens", "file": "tokens.json"},
            "audit": {"file": "audit-{replica}.jsonl"},
            "limits": {"perPrincipal": "2/minute"},
        }
        | server,
    )


def echo(text: str) -> dict[str, Any]:
    return {"name": "fake__echo", "arguments": {"text": text}}


async def verify(*files: Path) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        command = [str(AGENTIFY), "audit", "verify", *map(str, files)]
        return await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("mode", MODES)
async def test_every_operation_of_two_people_is_one_line_of_one_chain(
    tmp_path: Path, mode: str, receiver: OtlpReceiver
) -> None:
    config = audited_config(tmp_path)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "AGENTIFY_REPLICA_ID": "r7"}
    async with http_gateway(config, tmp_path / "e.log", env) as gateway:
        async with http_client(gateway.url, alice, mode) as client:
            called = await client.call_tool("call_tool", echo(ALICE_SECRET))
            tasked = await client.call_tool("orchestrate_task", TASK)
            read = await client.read_resource("demo://resource/dynamic/text/3", cache_mode="bypass")
            prompt = await client.get_prompt("everything__args-prompt", {"city": CITY})
            department = types.PromptReference(name="everything__completable-prompt")
            await client.complete(department, {"name": "department", "value": "Eng"})
        async with http_client(gateway.url, bob, mode) as client:
            await client.call_tool("call_tool", echo(BOB_SECRET))
            await client.call_tool("orchestrate_task", TASK)
            limited = await client.call_tool("call_tool", echo(BOB_SECRET))  # over perPrincipal 2/minute
        scraped = await anyio.to_thread.run_sync(request, "GET", gateway.at("/metrics"))
    assert text_of(called) == f"echo: {ALICE_SECRET}" and not tasked.is_error and limited.is_error
    assert read.contents and prompt.messages

    path = tmp_path / "audit-r7.jsonl"
    lines = path.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    seen = [(r["principal"], r["operation"], r["target"], r["decision"], r["outcome"]) for r in records]
    assert seen == [
        ("alice", "call_tool", "fake__echo", "allowed", "ok"),
        ("alice", "orchestrate_task", "fake__parent", "allowed", "ok"),
        ("alice", "resources/read", "demo://resource/dynamic/text/3", "allowed", "ok"),
        ("alice", "prompts/get", "everything__args-prompt", "allowed", "ok"),
        ("alice", "completion/complete", "everything__completable-prompt", "allowed", "ok"),
        ("bob", "call_tool", "fake__echo", "allowed", "ok"),
        ("bob", "orchestrate_task", "fake__parent", "allowed", "ok"),
        ("bob", "call_tool", "fake__echo", "rate_limited", "rate_limited"),
    ]
    assert {r["replica"] for r in records} == {"r7"}
    assert all(len(r["traceId"] or "") == 32 and r["durationMs"] >= 0 for r in records)
    assert all(r["client"] for r in records), [r["client"] for r in records]
    assert records[0]["argsSha256"] != records[5]["argsSha256"]  # the same tool, other arguments
    assert records[2]["argsSha256"] is None  # resources/read carries no arguments
    text = path.read_text()
    assert ALICE_SECRET not in text and BOB_SECRET not in text and CITY not in text
    assert alice not in text and bob not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    checked = await verify(path)
    assert checked.returncode == 0, checked.stderr.decode()
    assert b"8 lines in 1 files" in checked.stdout

    # Each line also went out as an OTLP log, its body the line as written (the gateway flushed as it stopped).
    await wait_until(lambda: len(receiver.received_logs()) >= len(lines), 30)
    logs = receiver.received_logs()
    assert [log.body for log in logs] == [line.decode() for line in lines]
    assert {log.event_name for log in logs} == {"agentify.audit"}
    assert [log.attributes["agentify.audit.principal"] for log in logs] == [r["principal"] for r in records]
    raw = "\n".join(receiver.raw)
    assert ALICE_SECRET not in raw and BOB_SECRET not in raw and alice not in raw and bob not in raw

    # /metrics from this machine, without AGENTIFY_METRICS_TOKEN: the calls and the refusal are counted.
    assert scraped.status == 200
    metrics = scraped.body["raw"]
    assert 'agentify_tool_calls_total{backend="fake",outcome="ok",tool="echo"} 2.0' in metrics
    assert 'agentify_tool_calls_total{backend="fake",outcome="ok",tool="parent"} 2.0' in metrics
    assert 'agentify_tool_calls_total{backend="unknown",outcome="rate_limited",tool="unknown"} 1.0' in metrics
    assert 'agentify_refusals_total{kind="rate_limited"} 1.0' in metrics
    assert 'agentify_backend_state{backend="fake",state="ready"} 1.0' in metrics
    assert "agentify_draining 0.0" in metrics


async def test_metrics_want_their_own_token_when_it_is_set(tmp_path: Path) -> None:
    config = audited_config(tmp_path)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    metrics_token = "metrics-token-0123456789abcdef"
    env = {"AGENTIFY_METRICS_TOKEN": metrics_token}
    async with http_gateway(config, tmp_path / "e.log", env) as gateway:
        url = gateway.at("/metrics")
        before = await anyio.to_thread.run_sync(request, "GET", url, metrics_token)
        async with http_client(gateway.url, alice, "auto") as client:
            await client.call_tool("call_tool", echo("counted"))
        refused = await anyio.to_thread.run_sync(request, "POST", gateway.url, "not-a-token", {"jsonrpc": "2.0"})
        none = await anyio.to_thread.run_sync(request, "GET", url)
        wrong = await anyio.to_thread.run_sync(request, "GET", url, alice)  # a person's token is not the metrics'
        after = await anyio.to_thread.run_sync(request, "GET", url, metrics_token)
    assert refused.status == 401
    assert none.status == 401 and "AGENTIFY_METRICS_TOKEN" in none.body["error_description"]
    assert {k.lower(): v for k, v in none.headers.items()}["www-authenticate"].startswith("Bearer")
    assert wrong.status == 401 and wrong.body["error"] == "invalid_token"
    assert before.status == after.status == 200
    assert 'agentify_tool_calls_total{backend="fake",outcome="ok",tool="echo"}' not in before.body["raw"]
    assert 'agentify_tool_calls_total{backend="fake",outcome="ok",tool="echo"} 1.0' in after.body["raw"]
    assert 'agentify_refusals_total{kind="unauthorized"} 1.0' in after.body["raw"]
    assert metrics_token not in gateway.log() and alice not in gateway.log()


async def test_without_a_metrics_token_only_this_machine_may_scrape(tmp_path: Path) -> None:
    config = audited_config(tmp_path)
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        local = await anyio.to_thread.run_sync(request, "GET", gateway.at("/metrics"))
        forwarded = await anyio.to_thread.run_sync(_forwarded, gateway.at("/metrics"))
    assert local.status == 200 and "agentify_open_sessions" in local.body["raw"]
    assert forwarded[0] == 403 and "AGENTIFY_METRICS_TOKEN" in forwarded[1]


def _forwarded(url: str) -> tuple[int, str]:
    """A scrape that came through a proxy (HAProxy adds X-Forwarded-For): not this machine's own."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"X-Forwarded-For": "203.0.113.9"})) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_a_second_gateway_on_the_same_audit_file_is_refused_at_start(tmp_path: Path) -> None:
    config = audited_config(tmp_path, audit={"file": "audit.jsonl"})
    async with http_gateway(config, tmp_path / "first.log"):
        with anyio.fail_after(120):
            command = [str(AGENTIFY), "serve", "--transport", "http", "--port", "0", "--config", str(config)]
            env = os.environ | gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
            second = await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL, env=env)
    assert second.returncode == 1
    assert b"is being written by another agentify process" in second.stderr
    assert b"{replica}" in second.stderr


@pytest.mark.parametrize("mode", MODES)
async def test_a_confirmed_and_a_declined_call_are_one_line_each(tmp_path: Path, mode: str) -> None:
    """In 2026-07-28 the confirmation is a round trip: the round that asks is no line, the one that ends is. The
    debug console's audit panel shows the same records, newest first."""
    confirming = fake_backend("fake", tools={"confirm": ["echo"]})
    console_port = free_port()
    config = write_config(
        tmp_path,
        [confirming],
        planner={"provider": "offline"},
        debugPort=console_port,
        server={"auth": {"type": "tokens", "file": "tokens.json"}, "audit": {"file": "audit.jsonl"}},
    )
    alice = await add_token(tmp_path / "tokens.json", "alice")
    bob = await add_token(tmp_path / "tokens.json", "bob")
    console_token = "console-token-0123456789abcdef"
    async with http_gateway(config, tmp_path / "e.log", {"AGENTIFY_DEBUG_TOKEN": console_token}) as gateway:
        async with http_client(gateway.url, alice, mode, elicitation_callback=answering("accept")) as client:
            confirmed = await client.call_tool("call_tool", echo(ALICE_SECRET))
        async with http_client(gateway.url, bob, mode, elicitation_callback=answering("decline")) as client:
            declined = await client.call_tool("call_tool", echo(BOB_SECRET))
        await wait_until(lambda: len((tmp_path / "audit.jsonl").read_bytes().splitlines()) == 2)
        panel = await anyio.to_thread.run_sync(
            request, "GET", f"http://127.0.0.1:{console_port}/api/audit", console_token
        )
    assert text_of(confirmed) == f"echo: {ALICE_SECRET}" and declined.is_error
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    assert [(r["principal"], r["target"], r["decision"], r["outcome"]) for r in records] == [
        ("alice", "fake__echo", "confirmed", "ok"),
        ("bob", "fake__echo", "declined", "denied"),
    ]
    assert (await verify(tmp_path / "audit.jsonl")).returncode == 0
    assert panel.status == 200 and panel.body == {"enabled": True, "records": records[::-1]}


async def test_each_replica_of_a_team_writes_its_own_chain(tmp_path: Path) -> None:
    """scripts/team.sh names its replicas (AGENTIFY_REPLICA_ID): with {replica} in the file, each has its own."""
    config = write_config(
        tmp_path,
        [fake_backend("fake")],
        planner={"provider": "offline"},
        server={"audit": {"file": "audit-{replica}.jsonl"}},
    )
    token = "team-audit-token-0123456789abcdef"
    async with team(config, tmp_path / "logs", replicas=2, env={"AGENTIFY_HTTP_TOKEN": token}) as member:
        async with http_client(member.url, token, "auto") as client:  # 2026-07-28: round robin, request by request
            for n in range(6):
                await client.call_tool("call_tool", echo(f"call {n}"))
        through_the_balancer = await anyio.to_thread.run_sync(request, "GET", member.url.replace("/mcp", "/metrics"))
    names = sorted(name for name in os.listdir(tmp_path) if name.startswith("audit-") and name.endswith(".jsonl"))
    assert names == ["audit-1.jsonl", "audit-2.jsonl"]
    files = [tmp_path / name for name in names]
    records = {f.name: [json.loads(line) for line in f.read_bytes().splitlines()] for f in files}
    assert {r["replica"] for r in records["audit-1.jsonl"]} == {"1"}
    assert {r["replica"] for r in records["audit-2.jsonl"]} == {"2"}
    assert sum(len(lines) for lines in records.values()) == 6 and all(records.values())
    for path in files:
        checked = await verify(path)
        assert checked.returncode == 0, checked.stderr.decode()
    assert through_the_balancer.status == 403  # HAProxy forwards for others: scraping through it needs the token


async def test_a_withheld_tool_and_its_approval_are_in_the_chain_across_restarts(tmp_path: Path) -> None:
    """Pinning (enforce): a tool that changed between runs is refused as withheld; `agentify pins approve`,
    run in another process, reaches the gateway as a change of trust; the chain goes on across the restart."""
    from tests.integration.test_pinned_tools import ECHO, PINNED_BACKEND, RUG

    source = tmp_path / "tools.json"
    source.write_text(json.dumps([ECHO]))
    backend = {"id": "demo", "command": sys.executable, "args": [str(PINNED_BACKEND), str(source)]}
    server = {"auth": {"type": "tokens", "file": "tokens.json"}, "audit": {"file": "audit.jsonl"}}
    config = write_config(tmp_path, [backend], pinning="enforce", expose=["search", "tools"], server=server)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    env = {"AGENTIFY_STATE_DIR": str(tmp_path / "state")}
    async with http_gateway(config, tmp_path / "e.log", env) as gateway:
        async with http_client(gateway.url, alice, "auto") as client:
            trusted = await client.call_tool("demo__echo", {"text": "hi"})  # trusted on first use
    source.write_text(json.dumps([RUG]))  # the backend changed its description between runs
    async with http_gateway(config, tmp_path / "e.log", env) as gateway:
        async with http_client(gateway.url, alice, "legacy") as client:
            withheld = await client.call_tool("demo__echo", {"text": "hi"})  # listed directly: expose tools
            with anyio.fail_after(60):
                approve = [str(AGENTIFY), "pins", "approve", "demo", "--config", str(config)]
                done = await anyio.run_process(approve, env=os.environ | gateway_env(None, **env), check=False)
            assert done.returncode == 0, done.stderr.decode()
            path = tmp_path / "audit.jsonl"
            await wait_until(lambda: b"pins_approved" in path.read_bytes(), 30)
            again = await client.call_tool("call_tool", {"name": "demo__echo", "arguments": {"text": "hi"}})
    assert not trusted.is_error and withheld.is_error and not again.is_error
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [(r["principal"], r["operation"], r["target"], r["decision"], r["outcome"]) for r in records] == [
        ("alice", "demo__echo", "demo__echo", "allowed", "ok"),
        ("alice", "demo__echo", "demo__echo", "withheld", "tool_changed"),
        ("agentify", "pins_approved", "demo__echo", "allowed", "ok"),
        ("alice", "call_tool", "demo__echo", "allowed", "ok"),
    ]
    assert records[2]["argsSha256"] is not None  # the approved digest, hashed
    checked = await verify(path)
    assert checked.returncode == 0 and b"4 lines in 1 files, from its first line" in checked.stdout


async def test_a_forbidden_call_and_a_change_of_the_access_rules_are_in_the_chain(tmp_path: Path) -> None:
    def configure(allowed: list[str]) -> Path:
        access = {"rules": [{"principals": ["alice"], "allow": allowed}]}
        server = {"auth": {"type": "tokens", "file": "tokens.json"}, "audit": {"file": "audit.jsonl"}}
        return write_config(
            tmp_path, [fake_backend("fake")], planner={"provider": "offline"}, server=server | {"access": access}
        )

    config = configure(["fake__echo"])
    alice = await add_token(tmp_path / "tokens.json", "alice")
    path = tmp_path / "audit.jsonl"
    parent = {"name": "fake__parent", "arguments": {}}
    async with http_gateway(config, tmp_path / "e.log") as gateway:
        async with http_client(gateway.url, alice, "auto") as client:
            allowed = await client.call_tool("call_tool", echo("hi"))
            forbidden = await client.call_tool("call_tool", parent)
            configure(["fake"])  # the whole backend, from the next request on
            await wait_until(lambda: b"access_reloaded" in path.read_bytes(), 30)
            now_allowed = await client.call_tool("call_tool", parent)
    assert not allowed.is_error and forbidden.is_error and not now_allowed.is_error
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [(r["principal"], r["operation"], r["target"], r["decision"], r["outcome"]) for r in records] == [
        ("alice", "call_tool", "fake__echo", "allowed", "ok"),
        ("alice", "call_tool", "fake__parent", "forbidden", "forbidden"),
        ("agentify", "access_reloaded", "server.access", "allowed", "ok"),
        ("alice", "call_tool", "fake__parent", "allowed", "ok"),
    ]
    assert records[2]["argsSha256"] is not None  # the rules now in force, hashed
    assert (await verify(path)).returncode == 0
