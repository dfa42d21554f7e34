"""Replicas, measured side by side in one run (README "Replicas"): `scripts/team.sh` with 1 and with 3
replicas, at once, on a backend that serves one call at a time.

- throughput of 1 and of 3 replicas (target: 3 replicas >= 2.5x one), each call holding the backend
  SLOW_SECONDS as a real one-at-a-time backend would, with the CPU each part spent per call (the
  replicas, their backends, HAProxy, and this script's clients, the load generator), and how much of
  the machine's CPU was left idle meanwhile: the ratio says something of agentify only while the
  machine had CPU to spare. The teams run with access rules, the audit and rate limits (in Redis)
  on, as a team would (target: a replica's CPU per call at most 3 ms);
- the HAProxy hop: a call through HAProxy against the same call straight to the replica (the team of one);
- p50/p99 and failed calls during a rolling restart (SIGHUP to team.sh: each replica SIGTERMed in turn);
- failed calls when one replica is SIGKILLed under load;
- the audit's cost (`server.audit`): one gateway with it and one without, called in turn, CPU per call and
  p50 side by side (target: the audit costs under 10 % of a call).

A team that fails to start leaves its logs in a folder the run does not remove; the message names it.

Usage: .venv/bin/python scripts/bench_team.py [--calls N] [--audit-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from bench_support import (
    AGENTIFY,
    REPO,
    cpu_seconds,
    descendants,
    interleaved,
    interleaved_percentiles,
    percentiles,
    timed_calls,
)

from tests.integration.team import http_client

TOKEN = "bench-team-token-0123456789abcdef"
SLOW_SECONDS = 0.1
"""How long one call holds the backend (--seconds): one replica serves 1/SLOW_SECONDS calls a second at most.
The longer, the less the gateway's and the client's own CPU counts on a loaded machine."""
CONCURRENCY = 9
"""Clients calling at once: three per replica, so that no backend waits for a call while round robin
spreads them unevenly."""
WORKERS = 4
ROUNDS_AUDIT = 9
SERVER = {
    "access": {"rules": [{"principals": ["shared-token"], "allow": ["fake"]}]},
    "audit": {"file": "audit-{replica}.jsonl"},
    "limits": {"perPrincipal": "100000/minute", "perBackend": {"fake": "100000/minute"}},
}
"""What the teams run with: access rules, the audit (beside the team's config) and rate limits (counted in the
team's Redis), each high enough never to refuse a call of this benchmark."""


class Team:
    def __init__(self, process: subprocess.Popen[bytes], url: str, errors: Path) -> None:
        self.process, self.url, self.errors = process, url, errors

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent so far by the replicas, their backends and HAProxy (living processes)."""
        replicas = {pid for pid, _ in self.replicas().values()}
        parts = {"replicas": replicas, "backends": {b for pid in replicas for b in descendants(pid)}}
        started = descendants(self.process.pid)
        parts["HAProxy"] = {pid for pid in started if _command(pid).split(b"\0")[0].endswith(b"haproxy")}
        return {part: sum(cpu_seconds(pid) for pid in pids) for part, pids in parts.items()}

    def replicas(self) -> dict[int, tuple[int, str]]:
        """Replica number -> (pid, own URL), as team.sh last reported them."""
        found: dict[int, tuple[int, str]] = {}
        for number, url, pid in re.findall(r"team: replica (\d+) at (\S+) pid (\d+)", self.errors.read_text()):
            found[int(number)] = (int(pid), url)
        return found


def team_config(work: Path, backend: dict[str, Any], replicas: int) -> Path:
    """A team's config in a folder of its own (its replicas' audit files go beside it)."""
    folder = work / f"team-{replicas}"
    folder.mkdir()
    config = folder / "agentify.json"
    config.write_text(json.dumps({"backends": [backend], "planner": {"provider": "offline"}, "server": SERVER}))
    return config


@contextmanager
def team(replicas: int, config: Path, work: Path) -> Iterator[Team]:
    errors = work / f"team-{replicas}.err"
    env = os.environ | {"AGENTIFY_HTTP_TOKEN": TOKEN, "AGENTIFY_BIN": str(AGENTIFY), "AGENTIFY_LOG_LEVEL": "WARNING"}
    # --port 0: team.sh chooses it outside the kernel's range for outgoing connections (see its free_port)
    command = ["bash", str(REPO / "scripts/team.sh"), "--replicas", str(replicas), "--port", "0"]
    command += ["--config", str(config), "--logs", str(work / f"logs-{replicas}")]
    with errors.open("wb") as err:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        if "ready at" not in line:
            kept = Path(tempfile.mkdtemp(prefix=f"bench-team-failed-{replicas}-"))  # outlives the run's folder
            shutil.copy(errors, kept / errors.name)
            if (work / f"logs-{replicas}").is_dir():
                shutil.copytree(work / f"logs-{replicas}", kept / f"logs-{replicas}")
            raise SystemExit(
                f"team.sh --replicas {replicas} did not start (its logs are kept in {kept}): "
                + errors.read_text()[-2000:]
            )
        yield Team(process, line.rsplit(" ", 1)[1].strip(), errors)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Throughput = tuple[float, dict[str, float], float]
"""Calls a second, the CPU milliseconds each part spent per call, and the cores the machine left idle meanwhile."""


def _idle_seconds() -> float:
    """CPU seconds all cores of this machine have spent idle since it started (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")  # idle + iowait


async def _throughput(team: Team, calls: int) -> Throughput:
    """`calls` slow calls from CONCURRENCY clients, timed once every client is connected."""
    slow = {"name": "fake__slow", "arguments": {"seconds": SLOW_SECONDS}}
    left = list(range(calls))
    connected = anyio.Event()
    ready: list[None] = []

    async def client() -> None:
        async with http_client(team.url, TOKEN, "auto") as session:
            ready.append(None)
            if len(ready) == CONCURRENCY:
                connected.set()
            await connected.wait()
            while left:
                left.pop()
                result = await session.call_tool("call_tool", slow)
                assert not result.is_error, result

    async with anyio.create_task_group() as tg:
        for _ in range(CONCURRENCY):
            tg.start_soon(client)
        await connected.wait()
        before, own_before, start = team.cpu_seconds(), time.process_time(), time.perf_counter()
        idle_before = _idle_seconds()
    elapsed = time.perf_counter() - start
    idle = (_idle_seconds() - idle_before) / elapsed
    spent = {part: seconds - before[part] for part, seconds in team.cpu_seconds().items()}
    spent["clients (this script)"] = time.process_time() - own_before
    return calls / elapsed, {part: seconds * 1000 / calls for part, seconds in spent.items()}, idle


async def _idle_cpu(team: Team, seconds: float = 5.0) -> float:
    """CPU milliseconds a second one replica spends while no call comes (the mean of the team's replicas)."""
    before = team.cpu_seconds()["replicas"]
    await anyio.sleep(seconds)
    return (team.cpu_seconds()["replicas"] - before) * 1000 / seconds / len(team.replicas())


async def _under_load(url: str, disturb: Any) -> tuple[list[float], list[str]]:
    """Latencies (ms) and failures of WORKERS clients calling while `disturb()` runs."""
    latencies: list[float] = []
    failures: list[str] = []
    done = anyio.Event()
    quick = {"name": "fake__slow", "arguments": {"seconds": 0.05}}

    async def worker() -> None:
        while not done.is_set():
            try:
                async with http_client(url, TOKEN, "auto") as session:
                    while not done.is_set():
                        start = time.perf_counter()
                        result = await session.call_tool("call_tool", quick)
                        if result.is_error:
                            failures.append(str(result.content)[:200])
                        else:
                            latencies.append((time.perf_counter() - start) * 1000)
            except Exception as exc:  # every failure a client sees is counted
                failure: BaseException = exc
                while isinstance(failure, BaseExceptionGroup):
                    failure = failure.exceptions[0]
                failures.append(f"{type(failure).__name__}: {failure}"[:200])

    async with anyio.create_task_group() as tg:
        for _ in range(WORKERS):
            tg.start_soon(worker)
        await anyio.sleep(2)
        await disturb()
        await anyio.sleep(2)
        done.set()
    return latencies, failures


@contextmanager
def gateway(config: Path, work: Path, name: str) -> Iterator[tuple[str, int]]:
    """One `agentify serve --transport http` (not behind HAProxy): its URL and pid, once /healthz answers."""
    port = _free_port()
    env = os.environ | {"AGENTIFY_HTTP_TOKEN": TOKEN, "AGENTIFY_LOG_LEVEL": "WARNING"}
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    with (work / f"{name}.err").open("wb") as err:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not start: {(work / f'{name}.err').read_text()[-2000:]}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


async def audit_cost(work: Path, backend: dict[str, Any], calls: int) -> float:
    """The audit's cost per call: the same quick call to a gateway with `server.audit` and to one without, in
    interleaved rounds; each gateway's own CPU (its writer thread included) and the client's p50. Returns the
    CPU milliseconds per call of the gateway without it (one gateway over HTTP, as bench_http measures one)."""
    plain = {"backends": [backend], "planner": {"provider": "offline"}}
    configs = {"audit off": work / "off.json", "audit on": work / "on.json"}
    configs["audit off"].write_text(json.dumps(plain))
    configs["audit on"].write_text(json.dumps(plain | {"server": {"audit": {"file": str(work / "audit.jsonl")}}}))
    echo = {"name": "fake__echo", "arguments": {"text": "an argument that is hashed, never written"}}
    with (
        gateway(configs["audit off"], work, "off") as (off_url, off_pid),
        gateway(configs["audit on"], work, "on") as (on_url, on_pid),
    ):
        async with http_client(off_url, TOKEN, "auto") as off, http_client(on_url, TOKEN, "auto") as on:
            sessions = {"audit off": (off, off_pid), "audit on": (on, on_pid)}
            for session, _ in sessions.values():  # warm: backends started, code paths imported
                for _ in range(20):
                    await session.call_tool("call_tool", echo)

            def measure(name: str) -> Any:
                session, pid = sessions[name]

                async def one_round() -> tuple[float, list[float]]:
                    before = cpu_seconds(pid)
                    latencies = await timed_calls(lambda: session.call_tool("call_tool", echo), calls)
                    return (cpu_seconds(pid) - before) * 1000 / calls, latencies

                return one_round

            rounds = await interleaved({name: measure(name) for name in sessions}, rounds=ROUNDS_AUDIT)
    off_rounds, on_rounds = rounds["audit off"], rounds["audit on"]
    # Each round of one gateway against the round of the other right beside it: load that comes and goes
    # falls on both alike; the median of those ratios, not the ratio of two medians.
    cpu_ratio = statistics.median(on[0] / off[0] for off, on in zip(off_rounds, on_rounds, strict=True))
    p50_ratio = statistics.median(
        statistics.median(on[1]) / statistics.median(off[1]) for off, on in zip(off_rounds, on_rounds, strict=True)
    )
    off_cpu: float = statistics.median(cpu for cpu, _ in off_rounds)
    on_cpu = statistics.median(cpu for cpu, _ in on_rounds)
    off_p50 = percentiles([ms for _, samples in off_rounds for ms in samples])[0]
    on_p50 = percentiles([ms for _, samples in on_rounds for ms in samples])[0]
    written = len((work / "audit.jsonl").read_bytes().splitlines())
    line_us = _audit_line_cpu(work / "bench-audit.jsonl", echo)
    print(f"the audit's cost, one gateway over HTTP, call_tool of a quick tool ({ROUNDS_AUDIT} x {calls} calls each):")
    print("                   CPU ms per call    p50 ms")
    print(f"  audit off        {off_cpu:8.2f}        {off_p50:7.2f}")
    print(f"  audit on         {on_cpu:8.2f}        {on_p50:7.2f}")
    print(
        f"  audit on / off, median of paired rounds: CPU {cpu_ratio:.3f}x, p50 {p50_ratio:.3f}x "
        f"(target: under 1.10x); {written} lines written"
    )
    print(
        f"  one audit line, written in this process: {line_us:.0f} us of CPU, "
        f"{100 * line_us / 1000 / off_cpu:.1f} % of a call's CPU without the audit (target: under 10 %)"
    )
    return off_cpu


def _audit_line_cpu(path: Path, arguments: dict[str, Any], lines: int = 20_000) -> float:
    """CPU microseconds per line of `AuditLog` alone (its thread included): queued, hashed, chained, written."""
    from loguru import logger

    from agentify.config.server import AuditConfig
    from agentify.team.audit import AuditLog
    from agentify.team.operations import Operation

    logger.disable("agentify")  # its start line would land in the figures

    log = AuditLog(AuditConfig(file=str(path)), "bench")
    log.open()
    done = Operation(
        time=time.time(),
        method="tools/call",
        principal="alice",
        client="bench/1",
        operation="call_tool",
        target="fake__echo",
        arguments=arguments,
        decision="allowed",
        outcome="ok",
        duration_ms=3.2,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    )
    before = time.process_time()
    for _ in range(lines):
        log.operation(done)
    log.close()
    return (time.process_time() - before) * 1e6 / lines


async def main(calls: int, audit_only: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-team-") as directory:
        work = Path(directory)
        fake = [str(REPO / "tests/fakes/mcp_backend.py"), "--one-at-a-time"]
        # One process per replica, as a one-at-a-time backend that cannot be started twice would have.
        backend = {"id": "fake", "command": sys.executable, "args": fake, "maxSessions": 1}
        one_gateway = await audit_cost(work, backend, max(calls // 2, 50))
        if audit_only:
            return
        with (
            team(1, team_config(work, backend, 1), work) as one,
            team(3, team_config(work, backend, 3), work) as three,
        ):
            print(f"load before: {os.getloadavg()[0]:.1f} (1-minute load average, 2 cores)")
            idle = await _idle_cpu(three)
            rounds = await interleaved(
                {"1 replica": lambda: _throughput(one, calls), "3 replicas": lambda: _throughput(three, calls)},
                rounds=3,
            )
            single, triple = (sorted(rounds[k])[1] for k in ("1 replica", "3 replicas"))  # the median round
            print(
                f"throughput, backend one call at a time ({SLOW_SECONDS:g} s each), {CONCURRENCY} clients, "
                "access rules, audit and limits on:"
            )
            print(f"  1 replica  {single[0]:6.1f} calls/s (at most {1 / SLOW_SECONDS:g})")
            print(
                f"  3 replicas {triple[0]:6.1f} calls/s (at most {3 / SLOW_SECONDS:g})   {triple[0] / single[0]:.2f}x"
            )
            print("  CPU ms per call        1 replica   3 replicas")
            for part in triple[1]:
                print(f"    {part:22s} {single[1][part]:6.1f}      {triple[1][part]:6.1f}")
            for name, (rate, parts, spare) in (("1 replica", single), ("3 replicas", triple)):
                used = rate * sum(parts.values()) / 1000
                print(
                    f"  {name}: the calls used {used:.2f} cores; the machine left {spare:.2f} of its "
                    f"{os.cpu_count()} cores idle meanwhile"
                )
            # Each replica spends `idle` a second whatever comes: the rest is what the calls cost.
            net = {n: parts["replicas"] - n * idle / rate for n, (rate, parts, _) in ((1, single), (3, triple))}
            print(
                f"  a replica spends {idle:.1f} ms of CPU a second with no call (timers, health checks, polls): "
                f"{net[1]:.1f} ms (1 replica) and {net[3]:.1f} ms (3 replicas) per call without it"
            )
            print(f"  load average after the rounds: {os.getloadavg()[0]:.1f}")

            parent = {"name": "fake__parent", "arguments": {}}
            # The team of one: through HAProxy and straight, a call reaches the same replica and backend, so the
            # difference is HAProxy's alone (round robin over three would add two more processes' caches).
            (_, direct_url) = one.replicas()[1]
            async with http_client(one.url, TOKEN, "auto") as via, http_client(direct_url, TOKEN, "auto") as direct:
                hop = await interleaved_percentiles(
                    {
                        "through HAProxy": lambda: via.call_tool("call_tool", parent),
                        "straight to a replica": lambda: direct.call_tool("call_tool", parent),
                    },
                    count=200,
                )
            print("one call, one client at a time, 1 replica through HAProxy and straight (p50 / p95 ms):")
            for name, (p50, p95) in hop.items():
                print(f"  {name:22s} {p50:7.2f} / {p95:7.2f}")
            hop_ratio = hop["through HAProxy"][0] / hop["straight to a replica"][0]
            print(f"  HAProxy hop: {hop_ratio:.2f}x the p50")
            print(
                f"side by side: HAProxy hop {hop_ratio:.2f}x a replica's p50 (target: within 1.1x) | a replica's CPU "
                f"per call {single[1]['replicas']:.2f} ms (1 replica), {triple[1]['replicas']:.2f} ms (3 replicas) "
                f"with access, audit and limits (target: at most 3 ms), one gateway over HTTP without them "
                f"{one_gateway:.2f} ms, a replica idle {idle:.1f} ms a second | 3 replicas "
                f"{triple[0] / single[0]:.2f}x the throughput of 1 (target: at least 2.5x), {triple[2]:.2f} of "
                f"{os.cpu_count()} cores idle meanwhile"
            )

            async def rolling() -> None:
                three.process.send_signal(signal.SIGHUP)
                with anyio.fail_after(600):
                    while "rolling restart done" not in three.errors.read_text():  # noqa: ASYNC110
                        await anyio.sleep(0.2)

            latencies, failed = await _under_load(three.url, rolling)
            p50, _ = percentiles(latencies)
            p99 = sorted(latencies)[max(int(len(latencies) * 0.99) - 1, 0)]
            print(f"rolling restart of 3 replicas (SIGTERM each in turn), {WORKERS} clients calling:")
            print(f"  {len(latencies)} ok, {len(failed)} failed; p50 {p50:.1f} ms, p99 {p99:.1f} ms")
            for failure in failed[:5]:
                print(f"    {failure}")

            killed: list[str] = []

            async def kill_one() -> None:
                """SIGKILL to a replica still running (one that stopped since its start is named, and skipped)."""
                for number, (pid, _) in sorted(three.replicas().items(), reverse=True):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        killed.append(f"replica {number} (pid {pid}) had already stopped: see its log")
                        continue
                    killed.append(f"replica {number} (pid {pid}) killed")
                    return

            latencies, failed = await _under_load(three.url, kill_one)
            print(f"SIGKILL of one replica under load: {len(latencies)} ok, {len(failed)} failed ({'; '.join(killed)})")
            print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=150, help="slow calls per throughput round")
    parser.add_argument("--seconds", type=float, default=SLOW_SECONDS, help="how long one call holds the backend")
    parser.add_argument("--audit-only", action="store_true", help="measure only the audit's cost (no team)")
    options = parser.parse_args()
    SLOW_SECONDS = options.seconds
    anyio.run(main, options.calls, options.audit_only)
