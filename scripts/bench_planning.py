"""The planning section of scripts/bench.py: what offline planning costs as the catalog grows, in process.

The catalogs are recorded, so no backend runs: the three example backends (47 tools, as
`agentify eval` sees them), and the same with the 17 largest generated backends of
examples/eval/generated-tools.json (20 backends, about 280 tools). The tasks are those of
examples/eval/routing-fresh.jsonl, planned (not executed) one after another, in turn:
  (a) p50/p95 of a plan over 47 and over about 280 tools, the index built once (as the gateway does:
      once per catalog change), and their ratio;
  (b) the same over about 280 tools with the index built for every task, which is what the cache saves.
The three are measured in interleaved rounds, so load on a shared machine falls on all alike.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from bench_support import REPO, ROUNDS, Call, interleaved, percentiles, timed_calls

from agentify.errors import AgentifyError
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
