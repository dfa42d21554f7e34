"""Benchmark: agentify's stdio transport to a backend against the SDK's `stdio_client`, side by side.

Both carry the same `ClientSession` to their own server-filesystem process, and make the same
`read_text_file` call in interleaved rounds (so load from elsewhere falls on both alike): p50 of
calls one after another, throughput at concurrency 16, and the CPU time this process spends per
call at concurrency 16 (`time.process_time`: the transport and the session run here, the server
in its own process). The session is the same on both sides, so the difference is the transport's.

Usage: .venv/bin/python scripts/bench_stdio.py [--json] [--calls N]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from bench_support import FS, ROUNDS, interleaved, percentiles, throughput, timed_calls, tools_call
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentify.backends.environment import backend_environment
from agentify.backends.stdio_process import spawn_backend


@asynccontextmanager
async def sdk_session(root: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command="node", args=[str(FS), str(root)])
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - instant, and errlog needs a real file
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def agentify_session(root: Path) -> AsyncIterator[ClientSession]:
    async with (
        spawn_backend("node", [str(FS), str(root)], backend_environment({}, False), None, lambda line: None) as process,
        ClientSession(process.read_stream, process.write_stream) as session,
    ):
        await session.initialize()
        yield session


async def cpu_per_call(call: Any, count: int) -> float:
    """Milliseconds of this process's CPU per call, `count` calls at concurrency 16."""
    start = time.process_time()
    await throughput(call, count, 16)
    return (time.process_time() - start) / count * 1000


async def run(calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "notes.txt").write_text("benchmark file\n")
        target = str((root / "notes.txt").resolve())
        async with sdk_session(root) as sdk, agentify_session(root) as ours:
            sides = {
                "sdk": lambda: tools_call(sdk, "read_text_file", {"path": target}),
                "agentify": lambda: tools_call(ours, "read_text_file", {"path": target}),
            }
            for call in sides.values():  # warm-up
                await throughput(call, 100, 4)
            per_round = max(calls // ROUNDS, 1)
            latency = await interleaved({k: functools.partial(timed_calls, c, per_round) for k, c in sides.items()})
            rps = await interleaved({k: functools.partial(throughput, c, per_round, 16) for k, c in sides.items()})
            cpu = await interleaved({k: functools.partial(cpu_per_call, c, per_round) for k, c in sides.items()})
    for side in sides:
        results[f"stdio_{side}_p50_ms"] = percentiles([s for one in latency[side] for s in one])[0]
        results[f"stdio_{side}_rps_c16"] = statistics.median(rps[side])
        results[f"stdio_{side}_cpu_ms"] = statistics.median(cpu[side])
    results["stdio_agentify_vs_sdk_p50"] = results["stdio_agentify_p50_ms"] / results["stdio_sdk_p50_ms"]
    results["stdio_agentify_vs_sdk_rps_c16"] = results["stdio_agentify_rps_c16"] / results["stdio_sdk_rps_c16"]
    results["stdio_agentify_vs_sdk_cpu"] = results["stdio_agentify_cpu_ms"] / results["stdio_sdk_cpu_ms"]
    return results


def print_table(r: dict[str, Any]) -> None:
    rows = [
        ("stdio transport p50, SDK / agentify", f"{r['stdio_sdk_p50_ms']:.3f} / {r['stdio_agentify_p50_ms']:.3f} ms"),
        ("  agentify / SDK", f"{r['stdio_agentify_vs_sdk_p50']:.2f}"),
        ("stdio transport c16, SDK / agentify", f"{r['stdio_sdk_rps_c16']:.0f} / {r['stdio_agentify_rps_c16']:.0f} /s"),
        ("  agentify / SDK", f"{r['stdio_agentify_vs_sdk_rps_c16']:.2f}"),
        ("client CPU per call, SDK / agentify", f"{r['stdio_sdk_cpu_ms']:.3f} / {r['stdio_agentify_cpu_ms']:.3f} ms"),
        ("  agentify / SDK", f"{r['stdio_agentify_vs_sdk_cpu']:.2f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    figures = anyio.run(run, args.calls)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures)
