"""Three replicas behind HAProxy, sharing Redis, as `scripts/team.sh` runs them, driven by the official
Python client: what a team sees when calls spread, sessions stick, replicas stop, Redis goes away and
someone guesses tokens."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import error_code, fake_backend, text_of, write_config
from tests.integration.cluster import Team, alive, team
from tests.integration.team import add_token, http_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
PARENT: dict[str, Any] = {"name": "fake__parent", "arguments": {}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def _config(tmp_path: Path, **limits: Any) -> Path:
    backends = [
        fake_backend("fake", "--marker", str(tmp_path / "backends.log"), tools={"confirm": ["echo"]}),
        fake_backend("limited", "--marker", str(tmp_path / "backends.log")),
    ]
    server = {"auth": {"type": "tokens", "file": "tokens.json"}, "limits": limits}  # team.sh: trustedProxies
    return write_config(tmp_path, backends, planner={"provider": "offline"}, server=server)


async def _accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={})


def _started(backends_log: Path) -> list[int]:
    return [int(line.split()[1]) for line in backends_log.read_text().splitlines() if line.startswith("started")]


async def _stops_clean(member: Team, backends_log: Path) -> None:
    """SIGTERM to team.sh: it exits 0 and leaves no process it started, backends included."""
    backends = _started(backends_log)
    member.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(90):
        await member.process.wait()
    assert member.process.returncode == 0, member.log()
    assert [pid for pid in [*member.pids(), *backends] if alive(pid)] == []


async def test_a_team_spreads_modern_calls_keeps_sessions_shares_confirmations_limits_and_back_off(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, perBackend={"limited": "3/minute"}, whenRedisDown="refuse")
    alice = await add_token(tmp_path / "tokens.json", "alice")
    async with team(config, tmp_path / "logs") as member:
        async with http_client(member.url, alice, "auto", elicitation_callback=_accept) as modern:
            spread = [text_of(await modern.call_tool("call_tool", PARENT)) for _ in range(6)]
            # Asked by one replica, answered (the same call again, with the answer) to the next one.
            confirmed = await modern.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "hi"}})
            echo = {"name": "limited__echo", "arguments": {"text": "counted"}}
            limited = [await modern.call_tool("call_tool", echo) for _ in range(4)]
        async with http_client(member.url, alice, "legacy") as legacy:
            stuck = [text_of(await legacy.call_tool("call_tool", PARENT)) for _ in range(6)]
        redis_answer = await anyio.to_thread.run_sync(_redis_ping, member.log())
        guesses, spoofing, guesser_valid, alice_meanwhile = await anyio.to_thread.run_sync(
            _guesses_then_others, member.url, alice
        )
        direct = await anyio.to_thread.run_sync(_direct_spoofing, next(iter(member.replicas.values())))
        os.kill(member.others["redis"], signal.SIGKILL)
        async with http_client(member.url, alice, "auto") as modern:
            refused = await modern.call_tool("call_tool", echo)
            unlimited = [text_of(await modern.call_tool("call_tool", PARENT)) for _ in range(3)]
        await _stops_clean(member, tmp_path / "backends.log")
    replicas = {str(pid) for pid in member.replicas}
    assert set(spread) == replicas, spread
    assert len(set(stuck)) == 1 and stuck[0] in replicas, stuck
    assert text_of(confirmed) == "echo: hi" and not confirmed.is_error
    assert [error_code(r) for r in limited] == [None, None, None, "rate_limited"]  # the replicas got into Redis
    assert redis_answer.startswith(b"-NOAUTH"), redis_answer  # nobody else does: it has a password
    logs = "".join(path.read_text(errors="replace") for path in (tmp_path / "logs").glob("*.log"))
    assert "redis://:" not in logs + member.log()  # never printed
    assert "backend 'limited' is over its limit of 3 per minute" in text_of(limited[3])
    assert error_code(refused) == "rate_limited" and "cannot be reached" in text_of(refused)
    assert set(unlimited) <= replicas and len(unlimited) == 3
    # Every request reaches a replica from HAProxy's 127.0.0.1: the back-off counts the forwarded address.
    assert guesses[:5] == [401] * 5 and guesses[-3:] == [429] * 3, guesses
    assert spoofing == 429  # the guesser's own X-Forwarded-For is not the right-most address
    assert guesser_valid == 200  # a token that verifies is never refused by the back-off (a NAT's colleagues)
    assert alice_meanwhile == 200  # without server.trustedProxies: 429, everyone shares HAProxy's address
    # Straight to a replica from 127.0.0.1 (not HAProxy's address): its X-Forwarded-For is not believed, so
    # it backs off as itself and picking a fresh address each time does not help it.
    assert direct[:5] == [401] * 5 and direct[-3:] == [429] * 3, direct


async def _load(url: str, token: str, workers: int, stop: anyio.Event, outcomes: list[str]) -> None:
    """`workers` clients calling a short slow tool until `stop`, half of them 2026-07-28 clients, half
    2025-11-25 ones with a session per few calls (as an agent's task); each outcome "ok" or what failed."""

    async def worker(mode: str) -> None:
        slow = {"name": "fake__slow", "arguments": {"seconds": 0.2}}
        calls_per_session = 3 if mode == "legacy" else None
        while not stop.is_set():
            try:  # a failed request ends the client's session: the next calls go through a new client
                async with http_client(url, token, mode) as client:
                    made = 0
                    while not stop.is_set() and made != calls_per_session:
                        result = await client.call_tool("call_tool", slow)
                        outcomes.append("ok" if not result.is_error else f"error: {text_of(result)[:200]}")
                        made += 1
            except Exception as exc:  # every failure a client sees is counted
                outcomes.append(f"{mode} {type(exc).__name__}: {_first_cause(exc)[:300]}")

    async with anyio.create_task_group() as tg:
        for number in range(workers):
            tg.start_soon(worker, ("auto", "legacy")[number % 2])


def _first_cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


async def _calls_until(outcomes: list[str], count: int) -> None:
    with anyio.fail_after(60):
        while len(outcomes) < count:  # noqa: ASYNC110 - the calls run in other processes
            await anyio.sleep(0.05)


async def test_sigterm_of_a_replica_under_load_loses_no_call_and_a_sigkill_loses_only_its_calls(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    workers = 4
    async with team(config, tmp_path / "logs") as member:
        first, second, _ = member.replicas
        termed: list[str] = []
        killed: list[str] = []
        after_kill = 0
        for pid, signum, outcomes in ((first, signal.SIGTERM, termed), (second, signal.SIGKILL, killed)):
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_load, member.url, alice, workers, stop, outcomes)
                await _calls_until(outcomes, 10)
                os.kill(pid, signum)
                with anyio.fail_after(60):
                    while alive(pid):  # noqa: ASYNC110 - another process
                        await anyio.sleep(0.05)
                settled = after_kill = len(outcomes)
                await _calls_until(outcomes, settled + 10)
                stop.set()
        await _stops_clean(member, tmp_path / "backends.log")
    print(f"SIGTERM: {termed.count('ok')} ok of {len(termed)}; SIGKILL: {len(killed) - killed.count('ok')} lost")
    assert [o for o in termed if o != "ok"] == []
    lost = [o for o in killed if o != "ok"]
    assert len(lost) <= workers, lost  # at most the calls in flight at the killed replica
    # the others serve on (a legacy client of the killed replica may learn late that its session is gone:
    # its stream's reconnection meets "Session not found" at another replica, and that counts among `lost`)
    assert killed[after_kill:].count("ok") >= 10 - workers, killed[after_kill:]


def _guesses_then_others(url: str, token: str) -> tuple[list[int], int, int, int]:
    """Wrong tokens from 127.0.0.2 until every replica backs it off (each counts alone), and a few more;
    then the guesser with a wrong token and an X-Forwarded-For of its own, the guesser with a valid token,
    and `token` from 127.0.0.3."""
    guesses: list[int] = []
    while guesses[-3:] != [429] * 3 and len(guesses) < 40:
        guesses.append(_initialize_from("127.0.0.2", url, "wrong-token"))
    guesses += [_initialize_from("127.0.0.2", url, "wrong-token") for _ in range(6)]
    spoofing = _initialize_from("127.0.0.2", url, "wrong-token", "10.9.8.7")
    return guesses, spoofing, _initialize_from("127.0.0.2", url, token), _initialize_from("127.0.0.3", url, token)


def _redis_ping(team_log: str) -> bytes:
    """What team.sh's Redis answers a PING without its password."""
    [(host, port)] = re.findall(r"redis at redis://([\d.]+):(\d+)/", team_log)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(b"PING\r\n")
        return connection.recv(200)


def _direct_spoofing(replica_url: str) -> list[int]:
    """Wrong tokens sent straight to a replica from 127.0.0.1, each with a new X-Forwarded-For."""
    return [_initialize_from("127.0.0.1", replica_url, "wrong-token", f"10.1.1.{n}") for n in range(8)]


def _initialize_from(source: str, url: str, token: str, forwarded: str | None = None) -> int:
    """The HTTP status of an `initialize` sent from the local address `source` (all of 127/8 is this
    machine), with an X-Forwarded-For of the client's own if `forwarded`."""
    host, _, rest = url.removeprefix("http://").partition("/")
    address, port = host.rsplit(":", 1)
    connection = http.client.HTTPConnection(address, int(port), timeout=30, source_address=(source, 0))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    headers["Accept"] = "application/json, text/event-stream"
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    try:
        connection.request("POST", f"/{rest}", json.dumps(INITIALIZE), headers)
        return connection.getresponse().status
    finally:
        connection.close()
