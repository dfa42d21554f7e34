"""The backend-layer section of scripts/bench.py: lazy backends, first calls, remote against stdio overhead.

Everything runs on this machine against real servers (server-filesystem over stdio,
server-everything over stdio and streamable HTTP on 127.0.0.1); the planner is the tests'
scripted OpenAI-compatible server, so every orchestrate_task costs the same planning round trip.
  (a) 20 lazy backends with manifests vs 20 eager vs 1 eager: time to `initialize` answered,
      time until every backend is settled (ready, or idle for lazy ones), and the RSS of the
      gateway together with all its descendants once settled (the maximum of five samples);
  (b) the first call of a lazy backend (start included) vs a warm call, vs that backend's cold
      start alone (spawn to first call answered, no gateway);
  (c) per-call p50 of a direct call to the same server and through the gateway (orchestrate_task
      and call_tool), for a remote backend (streamable HTTP) and a stdio one, in interleaved rounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from bench_support import (
    FS,
    fs_spec,
    gateway_params,
    gateway_pid,
    http_session,
    interleaved_percentiles,
    percentiles,
    states,
    stdio_session,
    timed_calls,
    tools_call,
    tree_rss_kib,
    wait_states,
    write_config,
)
from mcp.client.stdio import StdioServerParameters

from tests.fakes.model_server import ModelServer, Reply
from tests.servers import EVERYTHING, free_port, wait_accepting

SETTLED = {"ready", "idle"}


def fs_backends(directory: Path, count: int, **extra: Any) -> list[dict[str, Any]]:
    specs = []
    for i in range(count):
        root = directory / f"root{i}"
        root.mkdir(exist_ok=True)
        (root / "notes.txt").write_text(f"notes of root {i}\n")
        specs.append(fs_spec(f"fs{i}", root, **extra))
    return specs


async def start_cost(config: Path, model: ModelServer, cache: Path) -> dict[str, float]:
    """initialize time, time to settled, and RSS of the gateway tree once settled (and calm)."""
    start = time.perf_counter()
    async with stdio_session(gateway_params(config, model, cache)) as session:
        initialized = time.perf_counter() - start
        await wait_states(session, SETTLED)
        settled = time.perf_counter() - start
        await anyio.sleep(1.0)  # let start-up garbage settle before reading memory
        pid, samples = gateway_pid(), []
        for _ in range(5):
            samples.append(tree_rss_kib(pid))
            await anyio.sleep(0.2)
    return {"initialize_s": initialized, "settled_s": settled, "rss_kib": max(samples)}


async def lazy_first_call(directory: Path, model: ModelServer, cache: Path, calls: int) -> dict[str, float]:
    lazy, eager = fs_backends(directory, 2)
    config = write_config(directory / "lazy-one.json", [lazy | {"start": "lazy", "idleStopSeconds": 600}, eager])
    path = str(directory / "root0" / "notes.txt")

    def route(body: dict[str, Any]) -> Reply:
        backend = "fs1" if "warm up" in json.dumps(body["messages"]) else "fs0"
        return Reply.tool_call(
            f"{backend}__read_text_file", {"path": path.replace("root0", backend.replace("fs", "root"))}
        )

    model.router = route
    async with stdio_session(gateway_params(config, model, cache)) as session:
        await wait_states(session, SETTLED)
        await tools_call(session, "orchestrate_task", {"query": "warm up"})  # one-time costs of a first task
        await anyio.sleep(0.5)
        assert (await states(session))["fs0"] == "idle"
        start = time.perf_counter()
        await tools_call(session, "orchestrate_task", {"query": "read notes"})
        first = time.perf_counter() - start
        warm, _ = percentiles(
            await timed_calls(lambda: tools_call(session, "orchestrate_task", {"query": "read"}), calls)
        )
    alone = []
    for _ in range(5):
        start = time.perf_counter()
        params = StdioServerParameters(command="node", args=[str(FS), str(directory / "root0")])
        async with stdio_session(params) as direct:
            await tools_call(direct, "read_text_file", {"path": path})
            alone.append(time.perf_counter() - start)
    return {"lazy_first_call_s": first, "warm_call_s": warm / 1000, "cold_start_alone_s": percentiles(alone)[0]}


@asynccontextmanager
async def everything_http(port: int) -> AsyncIterator[str]:
    env = os.environ | {"PORT": str(port)}
    command = ["node", str(EVERYTHING), "streamableHttp"]
    async with await anyio.open_process(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as server:
        try:
            await wait_accepting(port)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.kill()


async def remote_vs_stdio(directory: Path, model: ModelServer, cache: Path, calls: int) -> dict[str, float]:
    """Direct, orchestrate_task and call_tool to echo, for the remote and the stdio backend, interleaved."""
    port = free_port()
    echo = {"message": "bench"}
    async with everything_http(port) as url:
        backends = [
            {"id": "remote", "url": url, "timeoutSeconds": 60},
            {"id": "local", "command": "node", "args": [str(EVERYTHING), "stdio"]},
        ]
        config = write_config(directory / "remote.json", backends)

        def route(body: dict[str, Any]) -> Reply:
            backend = "remote" if "via remote" in json.dumps(body["messages"]) else "local"
            return Reply.tool_call(f"{backend}__echo", echo)

        model.router = route
        stdio = StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])
        async with (
            http_session(url) as remote,
            stdio_session(stdio) as local,
            stdio_session(gateway_params(config, model, cache)) as gateway,
        ):
            await wait_states(gateway, SETTLED)
            targets = {}
            for kind, direct, backend in (("remote", remote, "remote"), ("stdio", local, "local")):
                targets[f"{kind}_direct"] = lambda d=direct: tools_call(d, "echo", echo)
                targets[f"{kind}_gateway"] = lambda k=kind: tools_call(
                    gateway, "orchestrate_task", {"query": f"echo via {k}"}
                )
                call = {"name": f"{backend}__echo", "arguments": echo}
                targets[f"{kind}_call_tool"] = lambda c=call: tools_call(gateway, "call_tool", c)
            for target in targets.values():  # warm-up
                for _ in range(10):
                    await target()
            measured = await interleaved_percentiles(targets, calls)
    figures = {f"{name}_p50_s": p50 / 1000 for name, (p50, _) in measured.items()}
    for kind in ("remote", "stdio"):
        direct = figures[f"{kind}_direct_p50_s"]
        figures[f"{kind}_call_tool_overhead_ms"] = (figures[f"{kind}_call_tool_p50_s"] - direct) * 1000
    return figures


async def run(model: ModelServer, calls: int, count: int) -> dict[str, Any]:
    """The section's figures (the scripted planner `model` is shared with the rest of the run)."""
    results: dict[str, Any] = {"backends": count, "calls": calls}
    with tempfile.TemporaryDirectory(prefix="agentify-bench-backends-") as temp:
        directory = Path(temp)
        cache = directory / "cache"
        eager_one = write_config(directory / "eager-1.json", fs_backends(directory, 1))
        eager_many = write_config(directory / "eager-n.json", fs_backends(directory, count))
        lazy_many = write_config(directory / "lazy-n.json", fs_backends(directory, count, start="lazy"))
        async with stdio_session(gateway_params(lazy_many, model, cache)) as session:
            await wait_states(session, SETTLED)  # the first run learns every manifest
            await wait_states(session, {"idle"})
        results["eager_1"] = await start_cost(eager_one, model, cache)
        results["eager_n"] = await start_cost(eager_many, model, cache)
        results["lazy_n"] = await start_cost(lazy_many, model, cache)
        results |= await lazy_first_call(directory, model, cache, calls)
        results |= await remote_vs_stdio(directory, model, cache, calls)
    one, eager, lazy = results["eager_1"], results["eager_n"], results["lazy_n"]
    results["lazy_n_vs_eager_1_rss"] = lazy["rss_kib"] / one["rss_kib"]
    results["lazy_n_vs_eager_1_initialize"] = lazy["initialize_s"] / one["initialize_s"]
    results["eager_n_vs_eager_1_rss"] = eager["rss_kib"] / one["rss_kib"]
    results["lazy_first_call_extra_vs_cold_start"] = (results["lazy_first_call_s"] - results["warm_call_s"]) / results[
        "cold_start_alone_s"
    ]
    for kind in ("remote", "stdio"):
        direct, gateway = results[f"{kind}_direct_p50_s"], results[f"{kind}_gateway_p50_s"]
        results[f"{kind}_overhead_ratio"] = gateway / direct
        results[f"{kind}_overhead_ms"] = (gateway - direct) * 1000
    return results


def print_table(r: dict[str, Any]) -> None:
    n = r["backends"]
    rows = [("start-up", "initialize", "settled", "RSS gateway + children")]
    for key, label in (("eager_1", "1 eager"), ("eager_n", f"{n} eager"), ("lazy_n", f"{n} lazy (manifests)")):
        f = r[key]
        rows.append(
            (
                label,
                f"{f['initialize_s'] * 1000:.0f} ms",
                f"{f['settled_s'] * 1000:.0f} ms",
                f"{f['rss_kib'] / 1024:.0f} MiB",
            )
        )
    for row in rows:
        print(f"{row[0]:<22} {row[1]:>12} {row[2]:>12} {row[3]:>24}")
    print(
        f"\n{n} lazy vs 1 eager: RSS x{r['lazy_n_vs_eager_1_rss']:.2f}, "
        f"initialize x{r['lazy_n_vs_eager_1_initialize']:.2f} (target < 1.2); "
        f"{n} eager vs 1 eager: RSS x{r['eager_n_vs_eager_1_rss']:.2f}"
    )
    print(
        f"lazy first call {r['lazy_first_call_s'] * 1000:.0f} ms, warm call {r['warm_call_s'] * 1000:.1f} ms, "
        f"cold start alone {r['cold_start_alone_s'] * 1000:.0f} ms: "
        f"start cost seen by the first call = x{r['lazy_first_call_extra_vs_cold_start']:.2f} of the cold start alone"
    )
    print(
        f"\n{'per call (p50)':<10} {'direct':>10} {'orchestrate':>12} {'ratio':>7} {'overhead':>10}"
        f" {'call_tool':>10} {'overhead':>10}"
    )
    for kind in ("remote", "stdio"):
        direct, gateway, call = (r[f"{kind}_{side}_p50_s"] * 1000 for side in ("direct", "gateway", "call_tool"))
        print(
            f"{kind:<10} {direct:>8.2f}ms {gateway:>10.2f}ms {r[f'{kind}_overhead_ratio']:>6.2f}x "
            f"{r[f'{kind}_overhead_ms']:>8.2f}ms {call:>8.2f}ms {r[f'{kind}_call_tool_overhead_ms']:>8.2f}ms"
        )
    print("target: a remote call's overhead over its direct call no more than a stdio call's")
