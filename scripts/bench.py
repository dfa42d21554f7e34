"""Benchmark: the gateway's cost over calling a backend directly, measured side by side in one run.

Against the real server-filesystem and a planner that answers at once (the offline planner by
default, or with --planner scripted the scripted OpenAI-compatible server of the tests on
127.0.0.1, which adds a real HTTP round trip per task), it measures:
  (a) p50/p95 of a direct MCP call to the backend;
  (b) p50/p95 of the same call through the floor, scripts/floor_proxy.py: a minimal pass-through
      proxy on the same SDK (one persistent ClientSession, no planning, logging or tracing);
  (c) p50/p95 of orchestrate_task doing the same read through the gateway, and its ratios to
      direct and to the floor;
  (d) throughput at concurrency 1 and 16, direct, through the floor and through the gateway;
  (e) cold start: spawn to `initialize` answered, and spawn to all backends ready, with 1 and
      3 backends, against the backends alone;
  (f) the gateway's RSS under load, sampled after each tenth of the calls once warmed up:
      early and late figures are each the maximum of three samples;
  (g) shutdown: SIGTERM to `agentify serve` with 3 backends ready, until the gateway and every
      backend process have exited.
Direct, floor and gateway are measured in alternating rounds, so load on a shared machine
falls on all three alike. Prints a table, or with --json one object with overhead_ratio_p50,
throughput_ratio_c16, floor_ratio_p50, floor_throughput_ratio_c16, initialize_s,
all_ready_ratio, rss_growth, shutdown_s (and the raw figures).

Usage: .venv/bin/python scripts/bench.py [--json] [--calls N] [--rss-calls N] [--planner offline|scripted]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.fakes.model_server import ModelServer, Reply  # noqa: E402

FS = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
AGENTIFY = REPO / ".venv/bin/agentify"
FLOOR = REPO / "scripts/floor_proxy.py"
POLL_SECONDS = 0.005
ROUNDS = 5


def fs_spec(backend_id: str, root: Path) -> dict[str, Any]:
    return {"id": backend_id, "command": "node", "args": [str(FS), str(root)]}


@asynccontextmanager
async def session_for(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - instant, and errlog needs a real file
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def tools_call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> None:
    """tools/call as the gateway itself calls backends: `ClientSession.call_tool` would also
    validate read_text_file's results against its output schema in this process, a cost that
    orchestrate_task (no output schema) does not have, and so would skew the comparison."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
    result = await session.send_request(request, types.CallToolResult)
    assert not result.is_error, result


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


async def timed_calls(call: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def throughput(call: Callable[[], Awaitable[Any]], count: int, concurrency: int) -> float:
    limiter = anyio.Semaphore(concurrency)

    async def one() -> None:
        async with limiter:
            await call()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    return count / (time.perf_counter() - start)


def gateway_params(config: Path, model: ModelServer | None) -> StdioServerParameters:
    env = {"AGENTIFY_LOG_LEVEL": "WARNING", "AGENTIFY_PLANNER": "offline"}
    if model is not None:
        env = {
            "OPENAI_API_KEY": "sk-bench-0000000000",
            "OPENAI_BASE_URL": model.base_url,
            "AGENTIFY_LOG_LEVEL": "WARNING",
        }
    return StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)


def write_config(directory: Path, backends: list[dict[str, Any]]) -> Path:
    path = directory / f"bench-{len(backends)}.json"
    path.write_text(json.dumps({"backends": backends}))
    return path


async def cold_start(config: Path, model: ModelServer | None, backend_ids: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    async with session_for(gateway_params(config, model)) as session:
        initialized = time.perf_counter() - start
        while True:
            listing = await session.call_tool("list_backends", {})
            states = {b["id"]: b["state"] for b in (listing.structured_content or {})["backends"]}
            if all(states.get(i) == "ready" for i in backend_ids):
                return initialized, time.perf_counter() - start
            await anyio.sleep(0.01)


async def backend_alone(root: Path) -> float:
    start = time.perf_counter()
    async with session_for(StdioServerParameters(command="node", args=[str(FS), str(root)])) as session:
        await session.list_tools()
        return time.perf_counter() - start


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def gateway_pid() -> int:
    """The newest `agentify serve` process started by this benchmark (others may run their own)."""
    newest = (0.0, 0)
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(part.endswith(b"bin/agentify") for part in cmdline) and b"serve" in cmdline:
                newest = max(newest, (Path(f"/proc/{pid}").stat().st_mtime, pid))
        except OSError:
            continue
    return newest[1]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")  # a zombie has exited; only its parent has not reaped it


async def shutdown_time(config: Path, model: ModelServer | None, backend_ids: list[str], limit: float = 30.0) -> float:
    """Seconds from SIGTERM to `agentify serve` until it and every process it started have exited."""
    async with session_for(gateway_params(config, model)) as session:
        with anyio.fail_after(limit):
            while True:
                listing = await session.call_tool("list_backends", {})
                states = {b["id"]: b["state"] for b in (listing.structured_content or {})["backends"]}
                if all(states.get(i) == "ready" for i in backend_ids):
                    break
                await anyio.sleep(0.01)
        pid = gateway_pid()
        processes = {pid} | descendants(pid)
        start = time.perf_counter()
        os.kill(pid, signal.SIGTERM)
        for _ in range(int(limit / POLL_SECONDS)):  # not our children: their exit can only be polled
            if not any(alive(p) for p in processes):
                break
            await anyio.sleep(POLL_SECONDS)
        return time.perf_counter() - start


async def interleaved(measures: dict[str, Callable[[], Awaitable[Any]]], rounds: int = ROUNDS) -> dict[str, list[Any]]:
    """Runs each measure `rounds` times, in turn, so that load from elsewhere falls on all alike."""
    figures: dict[str, list[Any]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            figures[name].append(await measure())
    return figures


async def main(calls: int, rss_calls: int, planner: str) -> dict[str, Any]:
    server = ModelServer().start()
    model = server if planner == "scripted" else None
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {_memory_gib()} GiB, "
        f"Python {platform.python_version()}",
        "planner": planner,
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "notes.txt").write_text("benchmark file\n")
        target = str((root / "notes.txt").resolve())
        server.router = lambda body: Reply.tool_call("fs__read_text_file", {"path": target})
        config1 = write_config(root, [fs_spec("fs", root)])
        config3 = write_config(root, [fs_spec("fs", root), fs_spec("fs2", root), fs_spec("fs3", root)])
        backend = StdioServerParameters(command="node", args=[str(FS), str(root)])
        floor_params = StdioServerParameters(command=sys.executable, args=[str(FLOOR), "node", str(FS), str(root)])

        async with (
            session_for(backend) as direct,
            session_for(floor_params) as floor,
            session_for(gateway_params(config1, model)) as gateway,
        ):

            async def direct_call() -> None:
                await tools_call(direct, "read_text_file", {"path": target})

            async def floor_call() -> None:
                await tools_call(floor, "read_text_file", {"path": target})

            async def gateway_call() -> None:
                task = {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(root)}}
                await tools_call(gateway, "orchestrate_task", task)

            targets = {"direct": direct_call, "floor": floor_call, "gateway": gateway_call}
            for call in targets.values():  # warm-up: imports, tool lists, caches
                await throughput(call, 50, 4)
            per_round = max(calls // ROUNDS, 1)
            latencies = await interleaved(
                {name: functools.partial(timed_calls, call, per_round) for name, call in targets.items()}
            )
            for name, rounds in latencies.items():
                samples = [sample for one_round in rounds for sample in one_round]
                results[f"{name}_p50_ms"], results[f"{name}_p95_ms"] = percentiles(samples)
            for level in (1, 16):
                rates = await interleaved(
                    {name: functools.partial(throughput, call, per_round, level) for name, call in targets.items()}
                )
                for name, figures in rates.items():
                    results[f"{name}_rps_c{level}"] = statistics.median(figures)
            pid = gateway_pid()
            await throughput(gateway_call, 100, 16)
            samples = []
            chunk = max((rss_calls - 100) // 10, 1)
            for _ in range(10):
                await throughput(gateway_call, chunk, 16)
                samples.append(rss_kib(pid))
            results["rss_samples_kib"] = samples
            results["rss_max_kib"] = max(samples)
            rss_early = max(samples[:3])
            results["rss_after_100_kib"], results[f"rss_after_{rss_calls}_kib"] = rss_early, max(samples[-3:])

        results["initialize_s_1"], results["all_ready_s_1"] = await cold_start(config1, model, ["fs"])
        results["initialize_s_3"], results["all_ready_s_3"] = await cold_start(config3, model, ["fs", "fs2", "fs3"])
        results["backend_alone_s"] = max([await backend_alone(root) for _ in range(3)])
        results["shutdown_s"] = await shutdown_time(config3, model, ["fs", "fs2", "fs3"])
    server.stop()
    results["overhead_ratio_p50"] = results["gateway_p50_ms"] / results["direct_p50_ms"]
    results["throughput_ratio_c16"] = results["gateway_rps_c16"] / results["direct_rps_c16"]
    results["floor_overhead_ratio_p50"] = results["floor_p50_ms"] / results["direct_p50_ms"]
    results["floor_ratio_p50"] = results["gateway_p50_ms"] / results["floor_p50_ms"]
    results["floor_throughput_ratio_c16"] = results["floor_rps_c16"] / results["gateway_rps_c16"]
    results["initialize_s"] = max(results["initialize_s_1"], results["initialize_s_3"])
    results["all_ready_ratio"] = results["all_ready_s_3"] / results["all_ready_s_1"]
    results["rss_growth"] = (results[f"rss_after_{rss_calls}_kib"] - rss_early) / rss_early
    return results


def _memory_gib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024)
    return 0


def print_table(r: dict[str, Any], rss_calls: int) -> None:
    rows = [
        ("machine", r["machine"], ""),
        ("planner", r["planner"], ""),
        ("read_text_file p50 / p95, direct", f"{r['direct_p50_ms']:.2f} / {r['direct_p95_ms']:.2f} ms", ""),
        ("read_text_file p50 / p95, floor proxy", f"{r['floor_p50_ms']:.2f} / {r['floor_p95_ms']:.2f} ms", ""),
        ("orchestrate_task p50 / p95, gateway", f"{r['gateway_p50_ms']:.2f} / {r['gateway_p95_ms']:.2f} ms", ""),
        ("overhead_ratio_p50 (gateway / direct)", f"{r['overhead_ratio_p50']:.2f}", "target <= 2.0"),
        ("floor_overhead_ratio_p50 (floor / direct)", f"{r['floor_overhead_ratio_p50']:.2f}", ""),
        ("floor_ratio_p50 (gateway / floor)", f"{r['floor_ratio_p50']:.2f}", "target <= 1.15"),
        (
            "throughput c1 direct / floor / gateway",
            f"{r['direct_rps_c1']:.0f} / {r['floor_rps_c1']:.0f} / {r['gateway_rps_c1']:.0f} calls/s",
            "",
        ),
        (
            "throughput c16 direct / floor / gateway",
            f"{r['direct_rps_c16']:.0f} / {r['floor_rps_c16']:.0f} / {r['gateway_rps_c16']:.0f} calls/s",
            "",
        ),
        ("throughput_ratio_c16 (gateway / direct)", f"{r['throughput_ratio_c16']:.2f}", "target >= 0.5"),
        ("floor_throughput_ratio_c16 (floor / gateway)", f"{r['floor_throughput_ratio_c16']:.2f}", "target <= 1.15"),
        ("spawn -> initialize, 1 / 3 backends", f"{r['initialize_s_1']:.2f} / {r['initialize_s_3']:.2f} s", ""),
        ("initialize_s", f"{r['initialize_s']:.2f} s", "target <= 1.5"),
        ("spawn -> all ready, 1 / 3 backends", f"{r['all_ready_s_1']:.2f} / {r['all_ready_s_3']:.2f} s", ""),
        ("one backend alone, spawn -> tools listed", f"{r['backend_alone_s']:.2f} s", ""),
        ("all_ready_ratio (3 together / 1)", f"{r['all_ready_ratio']:.2f}", "target <= 1.2"),
        (
            f"gateway RSS early / late of {rss_calls} calls (max of 3)",
            f"{r['rss_after_100_kib'] / 1024:.1f} / {r[f'rss_after_{rss_calls}_kib'] / 1024:.1f} MiB",
            "",
        ),
        ("rss_growth", f"{r['rss_growth']:.3f}", "target <= 0.10"),
        ("gateway RSS, max of 10 samples", f"{r['rss_max_kib'] / 1024:.1f} MiB", ""),
        ("shutdown_s (SIGTERM -> all 4 processes gone)", f"{r['shutdown_s']:.2f} s", "target < 1.0"),
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<24} {target}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rss-calls", type=int, default=5000)
    parser.add_argument("--planner", choices=["offline", "scripted"], default="offline")
    args = parser.parse_args()
    figures = anyio.run(main, args.calls, args.rss_calls, args.planner)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures, args.rss_calls)
