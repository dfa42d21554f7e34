"""Benchmark of the backend layer: lazy backends, first calls, and remote against stdio overhead, in one run.

Everything runs on this machine against real servers (server-filesystem over stdio,
server-everything over stdio and streamable HTTP on 127.0.0.1); the planner is the tests'
scripted OpenAI-compatible server, so every task costs the same planning round trip.
  (a) 20 lazy backends with manifests vs 20 eager vs 1 eager: time to `initialize` answered,
      time until every backend is settled (ready, or idle for lazy ones), and the RSS of the
      gateway together with all its descendants once settled;
  (b) the first call of a lazy backend (start included) vs a warm call, vs that backend's cold
      start alone (spawn to first call answered, no gateway);
  (c) per-call p50 through the gateway vs a direct call to the same server, for a remote backend
      (streamable HTTP) and for a stdio backend, side by side.
Prints a table, or with --json one object.

Usage: .venv/bin/python scripts/bench_backends.py [--json] [--calls N] [--backends N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.fakes.model_server import ModelServer, Reply  # noqa: E402
from tests.servers import EVERYTHING, free_port, wait_accepting  # noqa: E402

FS = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
AGENTIFY = REPO / ".venv/bin/agentify"
SETTLED = {"ready", "idle"}


@asynccontextmanager
async def stdio_session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - instant, and errlog needs a real file
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def gateway_params(config: Path, model: ModelServer, cache: Path) -> StdioServerParameters:
    env = {
        "OPENAI_API_KEY": "sk-bench-0000000000",
        "OPENAI_BASE_URL": model.base_url,
        "AGENTIFY_LOG_LEVEL": "WARNING",
        "AGENTIFY_CACHE_DIR": str(cache),
        "PATH": os.environ["PATH"],
    }
    return StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)


def write_config(path: Path, backends: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"backends": backends}))
    return path


def fs_backends(directory: Path, count: int, **extra: Any) -> list[dict[str, Any]]:
    specs = []
    for i in range(count):
        root = directory / f"root{i}"
        root.mkdir(exist_ok=True)
        (root / "notes.txt").write_text(f"notes of root {i}\n")
        specs.append({"id": f"fs{i}", "command": "node", "args": [str(FS), str(root)]} | extra)
    return specs


def tree_rss_kib(root_pid: int) -> int:
    """RSS of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
        rss[int(entry.name)] = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")), 0)
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def gateway_pid() -> int:
    """The `agentify serve` child of this benchmark."""
    mine = os.getpid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == mine and any(p.endswith(b"bin/agentify") for p in cmdline):
                return int(entry.name)
    raise RuntimeError("the gateway process was not found")


async def states(session: ClientSession) -> dict[str, str]:
    listing = await session.call_tool("list_backends", {})
    return {b["id"]: b["state"] for b in (listing.structured_content or {})["backends"]}


async def wait_settled(session: ClientSession) -> None:
    while not set((await states(session)).values()) <= SETTLED:  # noqa: ASYNC110 - another process's state
        await anyio.sleep(0.01)


async def start_cost(config: Path, model: ModelServer, cache: Path) -> dict[str, float]:
    """initialize time, time to settled, and RSS of the gateway tree once settled (and calm)."""
    start = time.perf_counter()
    async with stdio_session(gateway_params(config, model, cache)) as session:
        initialized = time.perf_counter() - start
        await wait_settled(session)
        settled = time.perf_counter() - start
        await anyio.sleep(1.0)  # let start-up garbage settle before reading memory
        rss = tree_rss_kib(gateway_pid())
    return {"initialize_s": initialized, "settled_s": settled, "rss_kib": rss}


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def timed(call: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    for _ in range(min(10, count)):
        await call()  # warm-up
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


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
        await wait_settled(session)
        await session.call_tool("orchestrate_task", {"query": "warm up"})  # one-time costs of a first task
        await anyio.sleep(0.5)
        assert (await states(session))["fs0"] == "idle"
        start = time.perf_counter()
        result = await session.call_tool("orchestrate_task", {"query": "read notes"})
        first = time.perf_counter() - start
        assert not result.is_error, result
        warm = p50(await timed(lambda: session.call_tool("orchestrate_task", {"query": "read notes"}), calls))
    alone = []
    for _ in range(5):
        start = time.perf_counter()
        params = StdioServerParameters(command="node", args=[str(FS), str(directory / "root0")])
        async with stdio_session(params) as direct:
            await direct.call_tool("read_text_file", {"path": path})
            alone.append(time.perf_counter() - start)
    return {"lazy_first_call_s": first, "warm_call_s": warm, "cold_start_alone_s": p50(alone)}


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
    port = free_port()
    async with everything_http(port) as url:
        backends = [
            {"id": "remote", "url": url, "timeoutSeconds": 60},
            {"id": "local", "command": "node", "args": [str(EVERYTHING), "stdio"]},
        ]
        config = write_config(directory / "remote.json", backends)

        def route(body: dict[str, Any]) -> Reply:
            text = json.dumps(body["messages"])
            backend = "remote" if "via remote" in text else "local"
            return Reply.tool_call(f"{backend}__echo", {"message": "bench"})

        model.router = route
        figures: dict[str, float] = {}
        async with http_session(url) as direct:
            figures["remote_direct_p50_s"] = p50(await timed(lambda: direct.call_tool("echo", {"message": "b"}), calls))
        params = StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])
        async with stdio_session(params) as direct:
            figures["stdio_direct_p50_s"] = p50(await timed(lambda: direct.call_tool("echo", {"message": "b"}), calls))
        async with stdio_session(gateway_params(config, model, cache)) as session:
            await wait_settled(session)
            for kind in ("remote", "stdio"):
                query = {"query": f"echo via {kind}"}
                samples = await timed(lambda q=query: session.call_tool("orchestrate_task", q), calls)  # type: ignore[misc]
                figures[f"{kind}_gateway_p50_s"] = p50(samples)
    return figures


async def main(calls: int, count: int) -> dict[str, Any]:
    model = ModelServer().start()
    results: dict[str, Any] = {"backends": count, "calls": calls}
    try:
        with tempfile.TemporaryDirectory(prefix="agentify-bench-backends-") as temp:
            directory = Path(temp)
            cache = directory / "cache"
            eager_one = write_config(directory / "eager-1.json", fs_backends(directory, 1))
            eager_many = write_config(directory / "eager-n.json", fs_backends(directory, count))
            lazy_many = write_config(directory / "lazy-n.json", fs_backends(directory, count, start="lazy"))
            async with stdio_session(gateway_params(lazy_many, model, cache)) as session:
                await wait_settled(session)  # the first run learns every manifest
                while set((await states(session)).values()) != {"idle"}:  # noqa: ASYNC110 - as above
                    await anyio.sleep(0.05)
            results["eager_1"] = await start_cost(eager_one, model, cache)
            results["eager_n"] = await start_cost(eager_many, model, cache)
            results["lazy_n"] = await start_cost(lazy_many, model, cache)
            results |= await lazy_first_call(directory, model, cache, calls)
            results |= await remote_vs_stdio(directory, model, cache, calls)
    finally:
        model.stop()
    one, eager, lazy = results["eager_1"], results["eager_n"], results["lazy_n"]
    results["lazy_n_vs_eager_1_rss"] = lazy["rss_kib"] / one["rss_kib"]
    results["lazy_n_vs_eager_1_initialize"] = lazy["initialize_s"] / one["initialize_s"]
    results["eager_n_vs_eager_1_rss"] = eager["rss_kib"] / one["rss_kib"]
    results["lazy_first_call_extra_vs_cold_start"] = (results["lazy_first_call_s"] - results["warm_call_s"]) / results[
        "cold_start_alone_s"
    ]
    results["remote_overhead_ratio"] = results["remote_gateway_p50_s"] / results["remote_direct_p50_s"]
    results["stdio_overhead_ratio"] = results["stdio_gateway_p50_s"] / results["stdio_direct_p50_s"]
    results["remote_overhead_ms"] = (results["remote_gateway_p50_s"] - results["remote_direct_p50_s"]) * 1000
    results["stdio_overhead_ms"] = (results["stdio_gateway_p50_s"] - results["stdio_direct_p50_s"]) * 1000
    return results


def print_table(r: dict[str, Any]) -> None:
    n = r["backends"]
    rows = [
        ("start-up", "initialize", "settled", "RSS gateway + children"),
    ]
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
    print(f"\n{'per call (p50)':<22} {'direct':>10} {'via gateway':>12} {'ratio':>8} {'overhead':>10}")
    for kind in ("remote", "stdio"):
        direct, gateway = r[f"{kind}_direct_p50_s"], r[f"{kind}_gateway_p50_s"]
        print(
            f"{kind:<22} {direct * 1000:>8.2f}ms {gateway * 1000:>10.2f}ms {r[f'{kind}_overhead_ratio']:>7.2f}x "
            f"{r[f'{kind}_overhead_ms']:>8.2f}ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--backends", type=int, default=20)
    args = parser.parse_args()
    figures = anyio.run(main, args.calls, args.backends)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures)
