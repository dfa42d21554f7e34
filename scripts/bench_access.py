"""What `server.access` costs per call, side by side in one run.

Three gateways over the same real server-filesystem, driven over stdio (principal `local`) in interleaved
rounds, each round in a rotated order (whichever side goes first in a round is measurably slower):
  none:   no `access` (everyone may use everything);
  rules:  three rules (a group, a scope, `local` by name; allow and deny patterns);
  cedar:  the same rules and a Cedar policy whose forbid names the called tool, with a condition on its
          arguments, so every call is evaluated by Cedar.
Measured for call_tool (no planning, so the access check is the largest share) and search_tools (the
caller's catalog view): p50/p95 per call and the ratio to `none`. Then, in process, one decision:
a rules check, a Cedar check of a tool a policy names, one of a tool no policy names, and a cached
`shows` (what every list asks per item).

    .venv/bin/python scripts/bench_access.py [--calls 300]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import (
    ROUNDS,
    Call,
    cpu_seconds,
    fs_spec,
    gateway_params,
    gateway_pid,
    percentiles,
    stdio_session,
    throughput,
    timed_calls,
    tools_call,
)

from agentify.config.server import AccessConfig
from agentify.team.access import Access, tool_target
from agentify.team.policy import Policy
from agentify.team.principal import Who

SIDES = ("none", "rules", "cedar")
RULES = [
    {"principals": ["group:qa"], "allow": ["fs"], "deny": ["fs__move_file"]},
    {"principals": ["scope:files:read"], "allow": ["fs__read_*"]},
    {"principals": ["local"], "allow": ["fs"], "deny": ["fs__write_file"]},
]
POLICY = """forbid(principal, action == Action::"call", resource == Tool::"fs__read_text_file")
  when { context.arguments has path && context.arguments.path like "*secret*" };
"""


def _configs(root: Path) -> dict[str, Path]:
    (root / "policy.cedar").write_text(POLICY)
    backends = [fs_spec("fs", root)]
    access: dict[str, Any] = {
        "none": None,
        "rules": {"rules": RULES},
        "cedar": {"rules": RULES, "policyFile": "policy.cedar"},
    }
    paths = {}
    for side, rules in access.items():
        path = root / f"bench-access-{side}.json"
        server = {"access": rules} if rules else {}
        path.write_text(json.dumps({"backends": backends, "server": server}))
        paths[side] = path
    return paths


async def run(root: Path, calls: int) -> dict[str, Any]:
    (root / "notes.txt").write_text("remember the milk\n")
    configs = _configs(root)
    call = {"name": "fs__read_text_file", "arguments": {"path": str((root / "notes.txt").resolve())}}
    search = {"query": "read a file", "limit": 5}
    results: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        sessions, pids = {}, {}
        for side, config in configs.items():
            sessions[side] = await stack.enter_async_context(stdio_session(gateway_params(config, None)))
            pids[side] = gateway_pid()
        for tool, arguments in (("call_tool", call), ("search_tools", search)):
            targets: dict[str, Call] = {
                side: functools.partial(tools_call, session, tool, arguments) for side, session in sessions.items()
            }
            for one in targets.values():  # warm-up
                await throughput(one, 30, 4)
            measured = await _rotated_percentiles(targets, calls, pids)
            for side, (p50, p95, cpu_ms) in measured.items():
                results[f"{tool}_{side}_p50_ms"], results[f"{tool}_{side}_p95_ms"] = p50, p95
                results[f"{tool}_{side}_cpu_ms"] = cpu_ms
    results |= _in_process(root)
    return results


async def _rotated_percentiles(
    calls: dict[str, Call], count: int, pids: dict[str, int]
) -> dict[str, tuple[float, float, float]]:
    """(p50, p95, gateway CPU per call) in ms of each call over `count` calls in all, in rounds whose order
    rotates. The CPU is the gateway process's own (its backend excluded), which the machine's load does not
    change as it changes latency."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu = dict.fromkeys(names, 0.0)
    per_round = max(count // ROUNDS, 1)
    for round_number in range(ROUNDS):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            before = cpu_seconds(pids[name])
            samples[name] += await timed_calls(calls[name], per_round)
            cpu[name] += cpu_seconds(pids[name]) - before
    return {name: (*percentiles(found), cpu[name] * 1000 / len(found)) for name, found in samples.items()}


def _in_process(root: Path) -> dict[str, float]:
    config = AccessConfig.model_validate({"rules": RULES})
    who = Who("alice", frozenset({"qa"}))
    named = tool_target("fs", "fs__read_text_file", "read_text_file")
    other = tool_target("fs", "fs__list_directory", "list_directory")
    arguments = {"arguments": {"path": "/srv/notes.txt"}}
    rules, cedar = Access(config), Access(config, Policy.load(root / "policy.cedar"))

    def per_call_us(work: Any, count: int = 2000) -> float:
        started = time.process_time()
        for _ in range(count):
            work()
        return (time.process_time() - started) / count * 1e6

    return {
        "decide_rules_us": per_call_us(lambda: rules.check(named, arguments, who)),
        "decide_cedar_named_us": per_call_us(lambda: cedar.check(named, arguments, who), 500),
        "decide_cedar_other_us": per_call_us(lambda: cedar.check(other, arguments, who)),
        "shows_cached_us": per_call_us(lambda: cedar.shows(named, who)),
    }


def print_table(r: dict[str, Any]) -> None:
    rows = []
    for tool in ("call_tool", "search_tools"):
        sides = " / ".join(f"{r[f'{tool}_{side}_p50_ms']:.2f}" for side in SIDES)
        tails = " / ".join(f"{r[f'{tool}_{side}_p95_ms']:.2f}" for side in SIDES)
        none = r[f"{tool}_none_p50_ms"]
        ratios = " / ".join(f"{r[f'{tool}_{side}_p50_ms'] / none:.3f}" for side in SIDES[1:])
        cpu = " / ".join(f"{r[f'{tool}_{side}_cpu_ms']:.2f}" for side in SIDES)
        none_cpu = r[f"{tool}_none_cpu_ms"]
        cpu_ratios = " / ".join(f"{r[f'{tool}_{side}_cpu_ms'] / none_cpu:.3f}" for side in SIDES[1:])
        rows += [
            (f"{tool} gateway CPU per call, none / rules / rules+cedar", f"{cpu} ms"),
            (f"{tool} CPU ratio to none, rules / rules+cedar", cpu_ratios),
            (f"{tool} p50, access none / rules / rules+cedar", f"{sides} ms"),
            (f"{tool} p95, access none / rules / rules+cedar", f"{tails} ms"),
            (f"{tool} p50 ratio to none, rules / rules+cedar", ratios),
        ]
    rows += [
        ("one decision in process: rules", f"{r['decide_rules_us']:.1f} us CPU"),
        ("one decision: Cedar, a tool a policy names", f"{r['decide_cedar_named_us']:.1f} us CPU"),
        ("one decision: Cedar, a tool no policy names", f"{r['decide_cedar_other_us']:.1f} us CPU"),
        ("what a list asks per item (cached)", f"{r['shows_cached_us']:.2f} us CPU"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side, in interleaved rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-access-") as folder:
        results = anyio.run(run, Path(folder), args.calls)
    print_table(results)


if __name__ == "__main__":
    main()
