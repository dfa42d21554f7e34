"""The planning section of scripts/bench.py: what offline planning costs as the catalog grows, in process.

The catalogs are recorded, so no backend runs: the three example backends (47 tools, as
`agentify eval` sees them), and the same with the 17 largest generated backends of
examples/eval/generated-tools.json (20 backends, about 280 tools). The tasks are those of
examples/eval/routing-fresh.jsonl, planned (not executed) one after another, in turn:
  (a) p50/p95 of a plan over 47 and over about 280 tools, the index built once (as the gateway does:
      once per catalog change), and their ratio;
  (b) the same over about 280 tools with the index built for every task, which is what the cache saves.
The three are measured in interleaved rounds, so load on a shared machine falls on all alike.

Run on its own (`.venv/bin/python scripts/bench_planning.py`), it also measures retrieval:
  (c) `search_tools` p50/p95 over about 3,000 tools (the public sets' tools, the example and generated
      backends, the generated ones repeated under other ids), hybrid against lexical only, interleaved;
  (d) the gateway (`agentify serve`, one filesystem backend): time to `initialize`, and its RSS after one
      `search_tools`, with the model and with AGENTIFY_EMBEDDINGS=off, in alternating runs;
  (e) the public sets' held-out figures (`agentify eval all --mode public`): search_tools against BM25,
      the offline planner and the model planner's shortlist.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from typing import Any

from bench_support import REPO, ROUNDS, Call, interleaved, percentiles, timed_calls

from agentify.errors import AgentifyError
from agentify.eval.public import available, evaluate_sets, load_public
from agentify.eval.routing import load_backends, load_cases
from agentify.planner.catalog import Catalog
from agentify.planner.offline import OfflinePlanner

EXAMPLE_TOOLS = REPO / "tests/planner/fixtures/example-tools.json"
GENERATED_TOOLS = REPO / "examples/eval/generated-tools.json"
TASKS = REPO / "examples/eval/routing-fresh.jsonl"
BACKENDS = 20


def catalogs() -> tuple[Catalog, Catalog]:
    """The example backends alone, and with the largest generated ones up to `BACKENDS` backends."""
    examples = load_backends(EXAMPLE_TOOLS)
    generated = sorted(load_backends(GENERATED_TOOLS), key=lambda backend: -len(backend[2]))
    return Catalog.build(examples), Catalog.build(examples + generated[: BACKENDS - len(examples)])


def planning(catalog: Catalog, planner: OfflinePlanner | None) -> Call:
    """Plans the next task of the set on `catalog`; a planner of its own per task when `planner` is None."""
    tasks = itertools.cycle([case.task for case in load_cases(TASKS, str(REPO))])

    async def plan() -> None:
        try:
            await (planner or OfflinePlanner()).plan(next(tasks), catalog)
        except AgentifyError:  # a refusal is a plan's cost too
            pass

    return plan


async def run(calls: int) -> dict[str, Any]:
    small, large = catalogs()
    results: dict[str, Any] = {"planning_tools_small": len(small), "planning_tools_large": len(large)}
    results["planning_backends_large"] = len({tool.backend for tool in large.tools.values()})
    sides = {  # (plan one task, how many per round): an index per task costs tens of ms, so fewer of those
        "small": (planning(small, OfflinePlanner()), max(calls // ROUNDS, 1)),
        "large": (planning(large, OfflinePlanner()), max(calls // ROUNDS, 1)),
        "rebuilt": (planning(large, None), max(calls // ROUNDS // 10, 1)),
    }
    for plan, _ in sides.values():  # warm-up: the cached indexes, imports
        for _ in range(5):
            await plan()
    measures = {name: functools.partial(timed_calls, plan, count) for name, (plan, count) in sides.items()}
    for name, samples in (await interleaved(measures)).items():
        p50, p95 = percentiles([sample for one in samples for sample in one])
        results[f"planning_{name}_p50_ms"], results[f"planning_{name}_p95_ms"] = p50, p95
    results["planning_large_vs_small"] = results["planning_large_p50_ms"] / results["planning_small_p50_ms"]
    results["planning_rebuilt_vs_large"] = results["planning_rebuilt_p50_ms"] / results["planning_large_p50_ms"]
    return results


def print_table(r: dict[str, Any]) -> None:
    small, large, backends = r["planning_tools_small"], r["planning_tools_large"], r["planning_backends_large"]
    rows = [
        (f"offline plan p50 / p95, 3 backends, {small} tools", "planning_small", ""),
        (f"offline plan p50 / p95, {backends} backends, {large} tools", "planning_large", "target p50 <= 2 ms"),
        ("the same, index built for every task", "planning_rebuilt", ""),
    ]
    lines = [(label, f"{r[f'{key}_p50_ms']:.2f} / {r[f'{key}_p95_ms']:.2f} ms", target) for label, key, target in rows]
    lines.append((f"planning_large_vs_small ({large} / {small} tools)", f"{r['planning_large_vs_small']:.2f}", ""))
    lines.append(("planning_rebuilt_vs_large (per task / once)", f"{r['planning_rebuilt_vs_large']:.2f}", ""))
    width = max(len(label) for label, _, _ in lines)
    for label, value, target in lines:
        print(f"{label:<{width}}  {value:<24} {target}")


SEARCH_TOOLS = 3000
GATEWAY_RUNS = 3


def large_catalog() -> Catalog:
    """About `SEARCH_TOOLS` tools: the public sets', the examples', and the generated ones, repeated."""
    backends = [b for name in available() for b in load_public(name).backends]
    backends += load_backends(EXAMPLE_TOOLS)
    generated = load_backends(GENERATED_TOOLS)
    copies = ((f"{bid}{copy or ''}", desc, tools) for copy in itertools.count() for bid, desc, tools in generated)
    while sum(len(tools) for _, _, tools in backends) < SEARCH_TOOLS:
        backends.append(next(copies))
    return Catalog.build(backends)


async def search_latency(calls: int) -> dict[str, Any]:
    from agentify.planner.retrieval import LEXICAL_ONLY, ToolIndex
    from agentify.planner.search import search_tools

    catalog = large_catalog()
    queries = itertools.cycle([q.text for name in available() for q in load_public(name).select("heldout")])
    indexes = {"hybrid": ToolIndex(catalog), "lexical": ToolIndex(catalog, LEXICAL_ONLY)}

    def searching(index: ToolIndex) -> Call:
        async def search() -> None:
            search_tools(index, next(queries), 5)

        return search

    for index in indexes.values():
        for _ in range(5):
            await searching(index)()  # warm-up: the model, the tool vectors
    measures = {
        name: functools.partial(timed_calls, searching(index), max(calls // ROUNDS, 1))
        for name, index in indexes.items()
    }
    results: dict[str, Any] = {"search_tools": len(catalog)}
    for name, index in indexes.items():  # CPU time per search: what the machine's load does not inflate
        search, started = searching(index), time.process_time()
        for _ in range(calls):
            await search()
        results[f"search_{name}_cpu_ms"] = (time.process_time() - started) / calls * 1000
    for name, samples in (await interleaved(measures)).items():
        results[f"search_{name}_p50_ms"], results[f"search_{name}_p95_ms"] = percentiles(
            [x for one in samples for x in one]
        )
    return results


async def gateway_costs() -> dict[str, Any]:
    import statistics
    import tempfile
    from pathlib import Path

    from bench_support import fs_spec, gateway_params, gateway_pid, rss_kib, stdio_session, tools_call, write_config

    found: dict[str, list[tuple[float, int]]] = {"model": [], "off": []}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config = write_config(root / "agentify.json", [fs_spec("fs", root)])
        for _ in range(GATEWAY_RUNS):
            for name, env in (("model", {}), ("off", {"AGENTIFY_EMBEDDINGS": "off"})):
                params = gateway_params(config, None, root / "cache", env)
                started = time.perf_counter()
                async with stdio_session(params) as session:
                    initialized = time.perf_counter() - started
                    await tools_call(session, "search_tools", {"query": "read the text of a file"})
                    found[name].append((initialized, rss_kib(gateway_pid())))
    results: dict[str, Any] = {}
    for name, runs in found.items():
        results[f"initialize_{name}_s"] = statistics.median(r[0] for r in runs)
        results[f"rss_{name}_mib"] = statistics.median(r[1] for r in runs) / 1024
    results["rss_model_extra_mib"] = results["rss_model_mib"] - results["rss_off_mib"]
    return results


async def public_figures() -> list[dict[str, Any]]:
    reports = await evaluate_sets([load_public(name) for name in available()], "heldout", 24, None)
    return [r.as_json() for r in reports]


def print_retrieval(r: dict[str, Any], figures: list[dict[str, Any]]) -> None:
    tools = r["search_tools"]
    rows = [
        (
            f"search_tools p50 / p95, hybrid, {tools} tools",
            f"{r['search_hybrid_p50_ms']:.2f} / {r['search_hybrid_p95_ms']:.2f} ms",
            "target p50 <= 5 ms",
        ),
        (
            f"search_tools p50 / p95, lexical only, {tools} tools",
            f"{r['search_lexical_p50_ms']:.2f} / {r['search_lexical_p95_ms']:.2f} ms",
            "",
        ),
        (
            "search_tools CPU per search, hybrid / lexical",
            f"{r['search_hybrid_cpu_ms']:.2f} / {r['search_lexical_cpu_ms']:.2f} ms",
            "",
        ),
        ("hybrid / lexical p50", f"{r['search_hybrid_p50_ms'] / r['search_lexical_p50_ms']:.2f}", ""),
        (
            "initialize, with the model / without",
            f"{r['initialize_model_s']:.2f} / {r['initialize_off_s']:.2f} s",
            "target <= 1.5 s",
        ),
        ("gateway RSS after a search, with / without", f"{r['rss_model_mib']:.0f} / {r['rss_off_mib']:.0f} MiB", ""),
        ("RSS the model adds", f"{r['rss_model_extra_mib']:.0f} MiB", "target <= 60 MiB"),
    ]
    width = max(len(label) for label, _, _ in rows)
    for label, value, target in rows:
        print(f"{label:<{width}}  {value:<24} {target}")
    print()
    print("held-out part (a check set: held out whole, marked *): agentify's search_tools (plain BM25)")
    columns = ("recall@1", "recall@5", "recall@10", "ndcg@5", "allInTop5")
    print(
        f"{'set':<11} {'queries':>7}  "
        + "  ".join(f"{c:<11}" for c in columns)
        + "  planner right / wrong (asking)  shortlist"
    )
    for f in figures:
        a, b, p, s = f["searchTools"], f["bm25"], f["offlinePlanner"], f["shortlist"]
        cells = [f"{a[c]:.2f} ({b[c]:.2f})" if a[c] is not None else "-" for c in columns]
        total = p["total"] or 1
        asking = f"{(p['right'] + p['askedRight']) / total:.1%} / {(p['wrong'] + p['askedWrong']) / total:.1%}"
        planner = f"{p['right'] / total:.1%} / {p['wrong'] / total:.1%} ({asking})"
        name = f"{f['set']}*" if f.get("checkSet") else f["set"]
        print(
            f"{name:<11} {a['queries']:>7}  "
            + "  ".join(f"{c:<11}" for c in cells)
            + f"  {planner:<30}  {s['holdsRight']:.1%}"
        )


async def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: wall times rise with it, CPU times do not")
    planning_results = await run(200)
    print_table(planning_results)
    print()
    results = await search_latency(500)
    results |= await gateway_costs()
    print_retrieval(results, await public_figures())


if __name__ == "__main__":
    import anyio

    anyio.run(main)
