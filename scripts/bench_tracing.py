"""The tracing section of scripts/bench.py: what OpenTelemetry costs per call, side by side in one run.

Three gateways over the same real server-filesystem, driven over stdio in interleaved rounds:
  off:    `OTEL_SDK_DISABLED=true` (no spans at all; the console shows no traces);
  on:     the default: every task traced for the console and `traceFile`, nothing exported;
  export: as on, and exported over OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`) to a receiver on
          127.0.0.1 that decodes every request (tests/otlp_receiver.py), with the metrics.
Measured for call_tool (no planning, so tracing is the largest share) and orchestrate_task:
p50/p95 per call and throughput at concurrency 16; the per-call cost is p50(on or export) - p50(off).
"""

from __future__ import annotations

import functools
import statistics
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench_support import (
    ROUNDS,
    Call,
    fs_spec,
    gateway_params,
    interleaved,
    interleaved_percentiles,
    stdio_session,
    throughput,
    tools_call,
    write_config,
)

from tests.fakes.model_server import ModelServer
from tests.otlp_receiver import OtlpReceiver

SIDES = ("off", "on", "export")


async def run(root: Path, model: ModelServer | None, calls: int) -> dict[str, Any]:
    receiver = OtlpReceiver().start()
    environments = {
        "off": {"OTEL_SDK_DISABLED": "true"},
        "on": {},
        "export": {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint},
    }
    config = write_config(root / "bench-tracing.json", [fs_spec("fs", root)])
    target = str((root / "notes.txt").resolve())
    task = {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(root)}}
    call = {"name": "fs__read_text_file", "arguments": {"path": target}}
    results: dict[str, Any] = {}
    try:
        async with AsyncExitStack() as stack:
            sessions = {
                side: await stack.enter_async_context(stdio_session(gateway_params(config, model, extra_env=env)))
                for side, env in environments.items()
            }
            for tool, arguments in (("call_tool", call), ("orchestrate_task", task)):
                targets: dict[str, Call] = {
                    side: functools.partial(tools_call, session, tool, arguments) for side, session in sessions.items()
                }
                for one in targets.values():  # warm-up
                    await throughput(one, 50, 4)
                for side, (p50, p95) in (await interleaved_percentiles(targets, calls)).items():
                    results[f"tracing_{tool}_{side}_p50_ms"], results[f"tracing_{tool}_{side}_p95_ms"] = p50, p95
                per_round = max(calls // ROUNDS, 1)
                measures = {side: functools.partial(throughput, one, per_round, 16) for side, one in targets.items()}
                for side, figures in (await interleaved(measures)).items():
                    results[f"tracing_{tool}_{side}_rps_c16"] = statistics.median(figures)
                off = results[f"tracing_{tool}_off_p50_ms"]
                for side in ("on", "export"):
                    results[f"tracing_{tool}_{side}_cost_ms"] = results[f"tracing_{tool}_{side}_p50_ms"] - off
                    results[f"tracing_{tool}_{side}_ratio_p50"] = results[f"tracing_{tool}_{side}_p50_ms"] / off
    finally:
        receiver.stop()
    results["tracing_spans_received"] = len(receiver.spans)
    return results


def print_table(r: dict[str, Any]) -> None:
    rows = []
    for tool in ("call_tool", "orchestrate_task"):
        sides = " / ".join(f"{r[f'tracing_{tool}_{side}_p50_ms']:.2f}" for side in SIDES)
        tails = " / ".join(f"{r[f'tracing_{tool}_{side}_p95_ms']:.2f}" for side in SIDES)
        rates = " / ".join(f"{r[f'tracing_{tool}_{side}_rps_c16']:.0f}" for side in SIDES)
        rows += [
            (f"{tool} p50, tracing off / on / export", f"{sides} ms"),
            (f"{tool} p95, tracing off / on / export", f"{tails} ms"),
            (f"{tool} throughput c16, off / on / export", f"{rates} calls/s"),
            (
                f"{tool} per-call cost, on / export (p50 - off)",
                f"{r[f'tracing_{tool}_on_cost_ms']:.3f} / {r[f'tracing_{tool}_export_cost_ms']:.3f} ms",
            ),
            (
                f"{tool} p50 ratio to off, on / export",
                f"{r[f'tracing_{tool}_on_ratio_p50']:.3f} / {r[f'tracing_{tool}_export_ratio_p50']:.3f}",
            ),
        ]
    rows.append(("spans the receiver decoded", f"{r['tracing_spans_received']}"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
