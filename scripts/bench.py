"""Benchmark: the gateway's cost over calling a backend directly, measured side by side in one run.

Section `floor`: against the real server-filesystem and a planner that answers at once (the
offline planner by default, or with --planner scripted the scripted OpenAI-compatible server of
the tests on 127.0.0.1, which adds a real HTTP round trip per task), it measures
  (a) p50/p95 of a direct MCP call to the backend;
  (b) p50/p95 of the same call through the floor, scripts/floor_proxy.py: a minimal pass-through
      proxy on the same SDK (one persistent ClientSession, no planning, logging or tracing), and
      the same floor on agentify's own stdio transport (`--pipes`), so that the ratios to it are
      the gateway's own work alone;
  (c) p50/p95 of the same read through the gateway, as orchestrate_task (planned) and as call_tool
      (the tool named by the client: no planning; validation, policy, tracing and result path as
      orchestrate_task), and their ratios to direct and to the floor;
  (d) throughput at concurrency 1 and 16 of all four;
  (e) the gateway's RSS under load, sampled after each tenth of the calls once warmed up:
      early and late figures are each the maximum of three samples.
Direct, floor and both gateway sides are measured in alternating rounds, so load on a shared
machine falls on all alike.
Section `start`: cold start (spawn to `initialize` answered, and to all backends ready) with 1 and
3 backends against one backend alone; shutdown (SIGTERM to `agentify serve` with 3 backends
ready, until the gateway and every backend process have exited).
Section `http` (scripts/bench_http.py): call_tool over streamable HTTP, with each server.auth type,
against stdio.
Section `backends` (scripts/bench_backends.py): 20 lazy vs 20 eager vs 1 eager backends, a lazy
backend's first call against its cold start, and remote against stdio per-call overhead.
Section `planning` (scripts/bench_planning.py): offline planning in process over the example
backends (47 tools) and over 20 backends (about 280 tools), with the index built once and per task.
Section `tracing` (scripts/bench_tracing.py): call_tool and orchestrate_task with OpenTelemetry off,
on (the default, nothing exported) and exporting over OTLP/HTTP to a receiver on 127.0.0.1.
Section `stdio` (scripts/bench_stdio.py): agentify's stdio transport to a backend against the SDK's
`stdio_client`, each under the same `ClientSession`.

Prints a table, or with --json one object: overhead_ratio_p50, throughput_ratio_c16,
floor_ratio_p50, floor_throughput_ratio_c16 (orchestrate_task), call_tool_floor_ratio_p50,
call_tool_floor_throughput_ratio_c16, initialize_s, all_ready_ratio, rss_growth, shutdown_s,
lazy_n_vs_eager_1_rss, lazy_n_vs_eager_1_initialize, remote_overhead_ms, stdio_overhead_ms,
planning_large_p50_ms, planning_large_vs_small, planning_rebuilt_vs_large, tracing_call_tool_on_cost_ms,
tracing_call_tool_export_cost_ms, http_token_vs_stdio_p50, http_tokens_vs_stdio_p50, http_jwt_vs_stdio_p50
(and the raw figures).

Usage: .venv/bin/python scripts/bench.py [--json] [--calls N] [--rss-calls N] [--planner offline|scripted]
       [--backends N] [--sections floor,start,http,backends,planning,tracing,stdio]
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
from pathlib import Path
from typing import Any

import anyio
import bench_backends
import bench_http
import bench_planning
import bench_stdio
import bench_tracing
from bench_support import (
    FS,
    REPO,
    ROUNDS,
    Call,
    alive,
    descendants,
    fs_spec,
    gateway_params,
    gateway_pid,
    interleaved,
    interleaved_percentiles,
    rss_kib,
    stdio_session,
    throughput,
    tools_call,
    wait_states,
    write_config,
)
from mcp.client.stdio import StdioServerParameters

from tests.fakes.model_server import ModelServer, Reply

FLOOR = REPO / "scripts/floor_proxy.py"
POLL_SECONDS = 0.005
SECTIONS = ("floor", "start", "http", "backends", "planning", "tracing", "stdio")


async def cold_start(config: Path, model: ModelServer | None) -> tuple[float, float]:
    start = time.perf_counter()
    async with stdio_session(gateway_params(config, model)) as session:
        initialized = time.perf_counter() - start
        await wait_states(session, {"ready"})
        return initialized, time.perf_counter() - start


async def backend_alone(root: Path) -> float:
    start = time.perf_counter()
    async with stdio_session(StdioServerParameters(command="node", args=[str(FS), str(root)])) as session:
        await session.list_tools()
        return time.perf_counter() - start


async def shutdown_time(config: Path, model: ModelServer | None, limit: float = 30.0) -> float:
    """Seconds from SIGTERM to `agentify serve` until it and every process it started have exited."""
    async with stdio_session(gateway_params(config, model)) as session:
        await wait_states(session, {"ready"}, limit)
        pid = gateway_pid()
        processes = {pid} | descendants(pid)
        start = time.perf_counter()
        os.kill(pid, signal.SIGTERM)
        for _ in range(int(limit / POLL_SECONDS)):  # not our children: their exit can only be polled
            if not any(alive(p) for p in processes):
                break
            await anyio.sleep(POLL_SECONDS)
        return time.perf_counter() - start


async def against_floor(root: Path, model: ModelServer | None, calls: int, rss_calls: int) -> dict[str, Any]:
    """Direct, floor, orchestrate_task and call_tool in interleaved rounds; then the gateway's RSS under load."""
    results: dict[str, Any] = {}
    target = str((root / "notes.txt").resolve())
    config = write_config(root / "bench-1.json", [fs_spec("fs", root)])
    backend = StdioServerParameters(command="node", args=[str(FS), str(root)])
    floor_params = StdioServerParameters(command=sys.executable, args=[str(FLOOR), "node", str(FS), str(root)])
    on_pipes = StdioServerParameters(command=sys.executable, args=[str(FLOOR), "--pipes", "node", str(FS), str(root)])
    async with (
        stdio_session(backend) as direct,
        stdio_session(floor_params) as floor,
        stdio_session(on_pipes) as floor_pipes,
        stdio_session(gateway_params(config, model)) as gateway,
    ):
        task = {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(root)}}
        call = {"name": "fs__read_text_file", "arguments": {"path": target}}
        targets: dict[str, Call] = {
            "direct": lambda: tools_call(direct, "read_text_file", {"path": target}),
            "floor": lambda: tools_call(floor, "read_text_file", {"path": target}),
            "floor_pipes": lambda: tools_call(floor_pipes, "read_text_file", {"path": target}),
            "gateway": lambda: tools_call(gateway, "orchestrate_task", task),
            "call_tool": lambda: tools_call(gateway, "call_tool", call),
        }
        for one in targets.values():  # warm-up: imports, tool lists, caches
            await throughput(one, 50, 4)
        for name, (p50, p95) in (await interleaved_percentiles(targets, calls)).items():
            results[f"{name}_p50_ms"], results[f"{name}_p95_ms"] = p50, p95
        per_round = max(calls // ROUNDS, 1)
        for level in (1, 16):
            measures = {name: functools.partial(throughput, one, per_round, level) for name, one in targets.items()}
            for name, figures in (await interleaved(measures)).items():
                results[f"{name}_rps_c{level}"] = statistics.median(figures)
        pid = gateway_pid()
        await throughput(targets["gateway"], 100, 16)
        samples = []
        chunk = max((rss_calls - 100) // 10, 1)
        for _ in range(10):
            await throughput(targets["gateway"], chunk, 16)
            samples.append(rss_kib(pid))
    results["rss_samples_kib"] = samples
    results["rss_max_kib"] = max(samples)
    rss_early = max(samples[:3])
    results["rss_after_100_kib"], results[f"rss_after_{rss_calls}_kib"] = rss_early, max(samples[-3:])
    results["rss_growth"] = (results[f"rss_after_{rss_calls}_kib"] - rss_early) / rss_early
    for side in ("gateway", "call_tool"):
        prefix = "" if side == "gateway" else "call_tool_"  # orchestrate_task's keys predate call_tool
        results[f"{prefix}overhead_ratio_p50"] = results[f"{side}_p50_ms"] / results["direct_p50_ms"]
        results[f"{prefix}throughput_ratio_c16"] = results[f"{side}_rps_c16"] / results["direct_rps_c16"]
        results[f"{prefix}floor_ratio_p50"] = results[f"{side}_p50_ms"] / results["floor_p50_ms"]
        results[f"{prefix}floor_throughput_ratio_c16"] = results["floor_rps_c16"] / results[f"{side}_rps_c16"]
        results[f"{prefix}pipes_floor_ratio_p50"] = results[f"{side}_p50_ms"] / results["floor_pipes_p50_ms"]
        rps = results[f"{side}_rps_c16"]
        results[f"{prefix}pipes_floor_throughput_ratio_c16"] = results["floor_pipes_rps_c16"] / rps
    results["floor_overhead_ratio_p50"] = results["floor_p50_ms"] / results["direct_p50_ms"]
    return results


async def start_and_stop(root: Path, model: ModelServer | None) -> dict[str, Any]:
    """Cold start with 1 and 3 backends against one backend alone; SIGTERM with 3 backends ready."""
    config1 = write_config(root / "bench-1.json", [fs_spec("fs", root)])
    config3 = write_config(root / "bench-3.json", [fs_spec(i, root) for i in ("fs", "fs2", "fs3")])
    results: dict[str, Any] = {}
    results["initialize_s_1"], results["all_ready_s_1"] = await cold_start(config1, model)
    results["initialize_s_3"], results["all_ready_s_3"] = await cold_start(config3, model)
    results["backend_alone_s"] = max([await backend_alone(root) for _ in range(3)])
    results["shutdown_s"] = await shutdown_time(config3, model)
    results["initialize_s"] = max(results["initialize_s_1"], results["initialize_s_3"])
    results["all_ready_ratio"] = results["all_ready_s_3"] / results["all_ready_s_1"]
    return results


async def main(calls: int, rss_calls: int, planner: str, backends: int, sections: list[str]) -> dict[str, Any]:
    server = ModelServer().start()
    model = server if planner == "scripted" else None
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {_memory_gib()} GiB, "
        f"Python {platform.python_version()}",
        "planner": planner,
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "notes.txt").write_text("benchmark file\n")
            target = str((root / "notes.txt").resolve())
            server.router = lambda body: Reply.tool_call("fs__read_text_file", {"path": target})
            if "floor" in sections:
                results |= await against_floor(root, model, calls, rss_calls)
            if "start" in sections:
                results |= await start_and_stop(root, model)
            if "http" in sections:
                results |= await bench_http.run(root, calls)
            if "tracing" in sections:
                results |= await bench_tracing.run(root, model, calls)
        if "backends" in sections:
            results |= await bench_backends.run(server, calls, backends)
        if "planning" in sections:
            results |= await bench_planning.run(calls)
        if "stdio" in sections:
            results |= await bench_stdio.run(calls)
    finally:
        server.stop()
    return results


def _memory_gib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024)
    return 0


_SIDES = "direct / floor / orchestrate_task / call_tool"
FLOOR_ROWS = (  # (label, value as a format string over the results, target)
    ("read_text_file p50 / p95, direct", "{direct_p50_ms:.2f} / {direct_p95_ms:.2f} ms", ""),
    ("read_text_file p50 / p95, floor proxy", "{floor_p50_ms:.2f} / {floor_p95_ms:.2f} ms", ""),
    (
        "read_text_file p50 / p95, floor proxy on agentify's stdio",
        "{floor_pipes_p50_ms:.2f} / {floor_pipes_p95_ms:.2f} ms",
        "",
    ),
    ("orchestrate_task p50 / p95, gateway", "{gateway_p50_ms:.2f} / {gateway_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95, gateway", "{call_tool_p50_ms:.2f} / {call_tool_p95_ms:.2f} ms", ""),
    ("floor_overhead_ratio_p50 (floor / direct)", "{floor_overhead_ratio_p50:.2f}", ""),
    ("call_tool_floor_ratio_p50 (call_tool / floor)", "{call_tool_floor_ratio_p50:.2f}", "target <= 1.15"),
    ("floor_ratio_p50 (orchestrate_task / floor)", "{floor_ratio_p50:.2f}", "target <= 1.35"),
    ("call_tool_overhead_ratio_p50 (call_tool / direct)", "{call_tool_overhead_ratio_p50:.2f}", ""),
    ("overhead_ratio_p50 (orchestrate_task / direct)", "{overhead_ratio_p50:.2f}", "target <= 2.0"),
    (
        f"throughput c1, {_SIDES}",
        "{direct_rps_c1:.0f} / {floor_rps_c1:.0f} / {gateway_rps_c1:.0f} / {call_tool_rps_c1:.0f}",
        "calls/s",
    ),
    (
        f"throughput c16, {_SIDES}",
        "{direct_rps_c16:.0f} / {floor_rps_c16:.0f} / {gateway_rps_c16:.0f} / {call_tool_rps_c16:.0f}",
        "calls/s",
    ),
    (
        "call_tool_floor_throughput_ratio_c16 (floor / call_tool)",
        "{call_tool_floor_throughput_ratio_c16:.2f}",
        "target <= 1.11 (call_tool at least 0.9x)",
    ),
    (
        "floor_throughput_ratio_c16 (floor / orchestrate_task)",
        "{floor_throughput_ratio_c16:.2f}",
        "target <= 1.25 (orchestrate_task at least 0.8x)",
    ),
    (
        "call_tool / floor on agentify's stdio: p50, c16 calls/s (pipes_floor_*)",
        "{call_tool_pipes_floor_ratio_p50:.2f}, {call_tool_pipes_floor_throughput_ratio_c16:.2f}",
        "",
    ),
    (
        "orchestrate_task / floor on agentify's stdio: p50, c16 calls/s",
        "{pipes_floor_ratio_p50:.2f}, {pipes_floor_throughput_ratio_c16:.2f}",
        "",
    ),
    ("call_tool_throughput_ratio_c16 (call_tool / direct)", "{call_tool_throughput_ratio_c16:.2f}", ""),
    ("throughput_ratio_c16 (orchestrate_task / direct)", "{throughput_ratio_c16:.2f}", "target >= 0.5"),
    ("gateway RSS early / late of {rss_calls} calls (max of 3)", "{rss_early_mib:.1f} / {rss_late_mib:.1f} MiB", ""),
    ("rss_growth", "{rss_growth:.3f}", "target <= 0.10"),
    ("gateway RSS, max of 10 samples", "{rss_max_mib:.1f} MiB", ""),
)
START_ROWS = (
    ("spawn -> initialize, 1 / 3 backends", "{initialize_s_1:.2f} / {initialize_s_3:.2f} s", ""),
    ("initialize_s", "{initialize_s:.2f} s", "target <= 1.5"),
    ("spawn -> all ready, 1 / 3 backends", "{all_ready_s_1:.2f} / {all_ready_s_3:.2f} s", ""),
    ("one backend alone, spawn -> tools listed", "{backend_alone_s:.2f} s", ""),
    ("all_ready_ratio (3 together / 1)", "{all_ready_ratio:.2f}", "target <= 1.2"),
    ("shutdown_s (SIGTERM -> all 4 processes gone)", "{shutdown_s:.2f} s", "target < 1.0"),
)


def print_table(r: dict[str, Any], rss_calls: int) -> None:
    rows = [("machine", "{machine}", ""), ("planner", "{planner}", "")]
    figures = dict(r, rss_calls=rss_calls)
    if "direct_p50_ms" in r:
        rows += FLOOR_ROWS
        figures |= {
            "rss_early_mib": r["rss_after_100_kib"] / 1024,
            "rss_late_mib": r[f"rss_after_{rss_calls}_kib"] / 1024,
            "rss_max_mib": r["rss_max_kib"] / 1024,
        }
    if "shutdown_s" in r:
        rows += START_ROWS
    lines = [(name.format_map(figures), value.format_map(figures), target) for name, value, target in rows]
    width = max(len(name) for name, _, _ in lines)
    for name, value, target in lines:
        print(f"{name:<{width}}  {value:<24} {target}")
    if "http_token_vs_stdio_p50" in r:
        print()
        bench_http.print_table(r)
    if "lazy_n" in r:
        print()
        bench_backends.print_table(r)
    if "planning_large_p50_ms" in r:
        print()
        bench_planning.print_table(r)
    if "tracing_spans_received" in r:
        print()
        bench_tracing.print_table(r)
    if "stdio_sdk_p50_ms" in r:
        print()
        bench_stdio.print_table(r)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rss-calls", type=int, default=5000)
    parser.add_argument("--planner", choices=["offline", "scripted"], default="offline")
    parser.add_argument("--backends", type=int, default=20, help="how many lazy and eager backends to start")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    args = parser.parse_args()
    chosen = [section for section in args.sections.split(",") if section]
    if unknown := set(chosen) - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    figures = anyio.run(main, args.calls, args.rss_calls, args.planner, args.backends, chosen)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures, args.rss_calls)
