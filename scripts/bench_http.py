"""The HTTP section of scripts/bench.py: the gateway's `call_tool` over streamable HTTP against stdio.

One gateway over stdio and three over HTTP on 127.0.0.1, each with one of the `server.auth` types
(the shared token, a tokens file, JWTs of the tests' JWKS issuer on 127.0.0.1), all in front of
server-filesystem, measured in interleaved rounds on one persistent session each (2025-11-25, as
IDEs keep one). Every HTTP call pays its auth check: a constant-time compare, a sha256 and a lookup,
or a cached JWT verification. Ratios are p50 over HTTP / p50 over stdio; the target is <= 1.2.
The p50 includes the client's own HTTP transport, which on the Python SDK costs more than the
server's: so the gateway's own per-call cost is measured too, as its CPU seconds per call (from
/proc, in interleaved rounds at concurrency 1) over HTTP against over stdio.
Beside them, in the same run:
- the floor (scripts/floor_proxy.py: the SDK alone, forwarding to the same backend) over stdio and
  over HTTP: its ratio is what the SDK's HTTP transport itself costs;
- a server that does no work (scripts/canned_mcp.py) over stdio and over HTTP: the difference is what
  the client's own HTTP transport adds to each call, so `best_http_vs_stdio_p50` (the gateway's stdio
  p50 plus that, over its stdio p50) is the best ratio any gateway could reach with that client;
- the same from the TypeScript client IDEs are built on (scripts/bench_ts_client.mjs), against the
  gateway over stdio and over HTTP (shared token) and against the canned server.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from bench_support import (
    AGENTIFY,
    FS,
    ROUNDS,
    cpu_seconds,
    fs_spec,
    gateway_params,
    gateway_pid,
    http_session,
    interleaved,
    interleaved_percentiles,
    stdio_session,
    throughput,
    tools_call,
)
from mcp.client.stdio import StdioServerParameters

from agentify.team.tokens_file import digest
from tests.fakes.jwks_issuer import JwksIssuer
from tests.servers import free_port, wait_accepting

SHARED_TOKEN = "bench-shared-token-0123456789"
PERSON_TOKEN = "agt_bench-person-token-0123456789"
AUTHS = ("token", "tokens", "jwt")
FLOOR = Path(__file__).with_name("floor_proxy.py")
CANNED = Path(__file__).with_name("canned_mcp.py")
TS_CLIENT = Path(__file__).with_name("bench_ts_client.mjs")


@contextmanager
def background(command: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    """A server process (its pid), its stderr in `log`, stopped on the way out."""
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
    try:
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextmanager
def http_gateway(config: Path, port: int, shared_token: str | None = None) -> Iterator[tuple[str, int]]:
    """Its URL and pid; its stderr goes to a file beside `config`."""
    env = os.environ | {"AGENTIFY_LOG_LEVEL": "WARNING", "AGENTIFY_PLANNER": "offline"}
    if shared_token:
        env["AGENTIFY_HTTP_TOKEN"] = shared_token
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    with background(command, config.with_suffix(".log"), env) as pid:
        yield f"http://127.0.0.1:{port}/mcp", pid


def _config(path: Path, root: Path, server: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"backends": [fs_spec("fs", root)], "server": server}))
    return path


async def run(root: Path, calls: int) -> dict[str, Any]:
    target = str((root / "notes.txt").resolve())
    call = {"name": "fs__read_text_file", "arguments": {"path": target}}
    issuer = JwksIssuer().start()
    (root / "tokens.json").write_text(json.dumps({"tokens": [{"name": "bench", "sha256": digest(PERSON_TOKEN)}]}))
    ports = {auth: free_port() for auth in (*AUTHS, "floor", "canned")}
    floor = [sys.executable, str(FLOOR), "node", str(FS), str(root)]
    jwt_url = f"http://127.0.0.1:{ports['jwt']}/mcp"
    servers = {
        "token": {},
        "tokens": {"auth": {"type": "tokens", "file": str(root / "tokens.json")}},
        "jwt": {"publicUrl": jwt_url, "auth": {"type": "jwt", "issuer": issuer.url}},
    }
    tokens = {"token": SHARED_TOKEN, "tokens": PERSON_TOKEN, "jwt": issuer.mint("bench", jwt_url)}
    configs = {auth: _config(root / f"bench-http-{auth}.json", root, servers[auth]) for auth in AUTHS}
    results: dict[str, Any] = {}
    try:
        with (
            http_gateway(configs["token"], ports["token"], SHARED_TOKEN) as (token_url, token_pid),
            http_gateway(configs["tokens"], ports["tokens"]) as (tokens_url, tokens_pid),
            http_gateway(configs["jwt"], ports["jwt"]) as (jwt_url, jwt_pid),
            background([*floor[:2], "--http", str(ports["floor"]), *floor[2:]], root / "bench-http-floor.log"),
            background([sys.executable, str(CANNED), "--http", str(ports["canned"])], root / "bench-http-canned.log"),
        ):
            for auth, port in ports.items():
                try:
                    await wait_accepting(port, 60)
                except TimeoutError:
                    log = (root / f"bench-http-{auth}.log").read_text()  # beside each config
                    raise RuntimeError(f"the HTTP server {auth} did not start:\n{log[-2000:]}") from None
            urls = {"token": token_url, "tokens": tokens_url, "jwt": jwt_url}
            async with (
                stdio_session(gateway_params(configs["token"], None)) as stdio,
                http_session(urls["token"], tokens["token"]) as token,
                http_session(urls["tokens"], tokens["tokens"]) as person,
                http_session(urls["jwt"], tokens["jwt"]) as jwt,
                stdio_session(StdioServerParameters(command=floor[0], args=floor[1:])) as floor_stdio,
                http_session(f"http://127.0.0.1:{ports['floor']}/mcp") as floor_http,
                stdio_session(StdioServerParameters(command=sys.executable, args=[str(CANNED)])) as canned_stdio,
                http_session(f"http://127.0.0.1:{ports['canned']}/mcp") as canned_http,
            ):
                sessions = {"stdio": stdio, "http_token": token, "http_tokens": person, "http_jwt": jwt}
                targets = {
                    name: (lambda s=session: tools_call(s, "call_tool", call)) for name, session in sessions.items()
                }
                others = {"floor_stdio": floor_stdio, "floor_http": floor_http}
                for name, session in (others | {"canned_stdio": canned_stdio, "canned_http": canned_http}).items():
                    targets[name] = lambda s=session: tools_call(s, "read_text_file", call["arguments"])
                for one in targets.values():  # warm-up: imports, tool lists, the JWKS, caches
                    await throughput(one, 50, 1)
                for name, (p50, p95) in (await interleaved_percentiles(targets, calls)).items():
                    results[f"{name}_p50_ms"], results[f"{name}_p95_ms"] = p50, p95
                pids = {"stdio": gateway_pid(), "http_token": token_pid, "http_tokens": tokens_pid, "http_jwt": jwt_pid}
                per_round = max(calls // ROUNDS, 1)
                measures = {
                    name: functools.partial(_cpu_ms, targets[name], pid, per_round) for name, pid in pids.items()
                }
                for name, figures in (await interleaved(measures)).items():
                    results[f"{name}_cpu_ms"] = statistics.median(figures)
            stdio_gateway = gateway_params(configs["token"], None)
            ts_targets = {
                "ts_stdio": {"command": stdio_gateway.command, "args": stdio_gateway.args, "env": stdio_gateway.env},
                "ts_http": {"url": urls["token"], "token": tokens["token"]},
                "ts_canned_stdio": {"command": sys.executable, "args": [str(CANNED)], "env": {}},
                "ts_canned_http": {"url": f"http://127.0.0.1:{ports['canned']}/mcp"},
            }
            gateway_call = {"name": "call_tool", "arguments": call}
            for name, target in ts_targets.items():
                canned = name.startswith("ts_canned")
                target["call"] = {"name": "read_text_file", "arguments": call["arguments"]} if canned else gateway_call
            results |= {f"{name}_p50_ms": p50 for name, p50 in (await _ts_client(ts_targets, calls)).items()}
    finally:
        issuer.stop()
    for auth in AUTHS:
        results[f"http_{auth}_vs_stdio_p50"] = results[f"http_{auth}_p50_ms"] / results["stdio_p50_ms"]
        results[f"http_{auth}_vs_stdio_cpu"] = results[f"http_{auth}_cpu_ms"] / results["stdio_cpu_ms"]
    results["floor_http_vs_stdio_p50"] = results["floor_http_p50_ms"] / results["floor_stdio_p50_ms"]
    # What the client alone adds over HTTP (against a server that does nothing on either transport), and
    # so the best ratio any gateway could reach with this client: its stdio p50 plus that, over its stdio p50.
    for client in ("", "ts_"):
        extra = results[f"{client}canned_http_p50_ms"] - results[f"{client}canned_stdio_p50_ms"]
        results[f"{client}client_http_extra_ms"] = extra
        results[f"{client}best_http_vs_stdio_p50"] = (results[f"{client}stdio_p50_ms"] + extra) / results[
            f"{client}stdio_p50_ms"
        ]
    results["ts_http_vs_stdio_p50"] = results["ts_http_p50_ms"] / results["ts_stdio_p50_ms"]
    return results


async def _ts_client(targets: dict[str, Any], calls: int) -> dict[str, float]:
    """p50 per target from the TypeScript client (scripts/bench_ts_client.mjs), in interleaved rounds."""
    spec = json.dumps({"targets": targets, "calls": calls, "rounds": ROUNDS})
    done = await anyio.run_process(["node", "--no-warnings", str(TS_CLIENT), spec], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the TypeScript client failed:\n{done.stderr.decode(errors='replace')[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


async def _cpu_ms(call: Any, pid: int, count: int) -> float:
    """The gateway's CPU milliseconds per call, over `count` calls one after another."""
    before = cpu_seconds(pid)
    for _ in range(count):
        await call()
    return (cpu_seconds(pid) - before) * 1000 / count


ROWS = (
    ("call_tool p50 / p95 over stdio", "{stdio_p50_ms:.2f} / {stdio_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, shared token", "{http_token_p50_ms:.2f} / {http_token_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, tokens file", "{http_tokens_p50_ms:.2f} / {http_tokens_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, JWT", "{http_jwt_p50_ms:.2f} / {http_jwt_p95_ms:.2f} ms", ""),
    ("http_token_vs_stdio_p50", "{http_token_vs_stdio_p50:.2f}", "target <= 1.2"),
    ("http_tokens_vs_stdio_p50", "{http_tokens_vs_stdio_p50:.2f}", "target <= 1.2"),
    ("http_jwt_vs_stdio_p50", "{http_jwt_vs_stdio_p50:.2f}", "target <= 1.2"),
    (
        "gateway CPU per call: stdio / token / tokens / JWT",
        "{stdio_cpu_ms:.2f} / {http_token_cpu_ms:.2f} / {http_tokens_cpu_ms:.2f} / {http_jwt_cpu_ms:.2f} ms",
        "",
    ),
    ("http_token_vs_stdio_cpu", "{http_token_vs_stdio_cpu:.2f}", "target <= 1.2"),
    ("http_tokens_vs_stdio_cpu", "{http_tokens_vs_stdio_cpu:.2f}", "target <= 1.2"),
    ("http_jwt_vs_stdio_cpu", "{http_jwt_vs_stdio_cpu:.2f}", "target <= 1.2"),
    ("floor proxy p50 / p95 over stdio", "{floor_stdio_p50_ms:.2f} / {floor_stdio_p95_ms:.2f} ms", ""),
    ("floor proxy p50 / p95 over HTTP", "{floor_http_p50_ms:.2f} / {floor_http_p95_ms:.2f} ms", ""),
    ("floor_http_vs_stdio_p50 (the SDK's own)", "{floor_http_vs_stdio_p50:.2f}", ""),
    ("canned server p50 over stdio / HTTP", "{canned_stdio_p50_ms:.2f} / {canned_http_p50_ms:.2f} ms", ""),
    ("client_http_extra_ms (the client's own HTTP)", "{client_http_extra_ms:.2f} ms", ""),
    ("best_http_vs_stdio_p50 (a gateway free over HTTP)", "{best_http_vs_stdio_p50:.2f}", ""),
    ("TS client: call_tool p50 over stdio / HTTP", "{ts_stdio_p50_ms:.2f} / {ts_http_p50_ms:.2f} ms", ""),
    ("ts_http_vs_stdio_p50", "{ts_http_vs_stdio_p50:.2f}", "target <= 1.2"),
    ("TS client: canned p50 over stdio / HTTP", "{ts_canned_stdio_p50_ms:.2f} / {ts_canned_http_p50_ms:.2f} ms", ""),
    ("ts_client_http_extra_ms", "{ts_client_http_extra_ms:.2f} ms", ""),
    ("ts_best_http_vs_stdio_p50 (a gateway free over HTTP)", "{ts_best_http_vs_stdio_p50:.2f}", ""),
)


def print_table(r: dict[str, Any]) -> None:
    lines = [(name, value.format_map(r), target) for name, value, target in ROWS]
    width = max(len(name) for name, _, _ in lines)
    for name, value, target in lines:
        print(f"{name:<{width}}  {value:<24} {target}")


if __name__ == "__main__":  # the section alone
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "notes.txt").write_text("benchmark file\n")
        print_table(anyio.run(run, Path(tmp), 500))
