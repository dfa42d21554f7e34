"""The HTTP section of scripts/bench.py: the gateway's `call_tool` over streamable HTTP against stdio.

One gateway over stdio and three over HTTP on 127.0.0.1, each with one of the `server.auth` types
(the shared token, a tokens file, JWTs of the tests' JWKS issuer on 127.0.0.1), all in front of
server-filesystem, measured in interleaved rounds on one persistent session each (2025-11-25, as
IDEs keep one). Every HTTP call pays its auth check: a constant-time compare, a sha256 and a lookup,
or a cached JWT verification. Ratios are p50 over HTTP / p50 over stdio; the target is <= 1.2.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from bench_support import (
    AGENTIFY,
    fs_spec,
    gateway_params,
    http_session,
    interleaved_percentiles,
    stdio_session,
    throughput,
    tools_call,
)

from agentify.security.team_tokens import digest
from tests.fakes.jwks_issuer import JwksIssuer
from tests.servers import free_port, wait_accepting

SHARED_TOKEN = "bench-shared-token-0123456789"
PERSON_TOKEN = "agt_bench-person-token-0123456789"
AUTHS = ("token", "tokens", "jwt")


@contextmanager
def http_gateway(config: Path, port: int, shared_token: str | None = None) -> Iterator[str]:
    """Its stderr goes to a file beside `config`."""
    env = os.environ | {"AGENTIFY_LOG_LEVEL": "WARNING", "AGENTIFY_PLANNER": "offline"}
    if shared_token:
        env["AGENTIFY_HTTP_TOKEN"] = shared_token
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    with config.with_suffix(".log").open("w") as log:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _config(path: Path, root: Path, server: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"backends": [fs_spec("fs", root)], "server": server}))
    return path


async def run(root: Path, calls: int) -> dict[str, Any]:
    target = str((root / "notes.txt").resolve())
    call = {"name": "fs__read_text_file", "arguments": {"path": target}}
    issuer = JwksIssuer().start()
    (root / "tokens.json").write_text(json.dumps({"tokens": [{"name": "bench", "sha256": digest(PERSON_TOKEN)}]}))
    ports = {auth: free_port() for auth in AUTHS}
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
            http_gateway(configs["token"], ports["token"], SHARED_TOKEN) as token_url,
            http_gateway(configs["tokens"], ports["tokens"]) as tokens_url,
            http_gateway(configs["jwt"], ports["jwt"]) as jwt_url,
        ):
            for auth, port in ports.items():
                try:
                    await wait_accepting(port, 60)
                except TimeoutError:
                    log = configs[auth].with_suffix(".log").read_text()[-2000:]
                    raise RuntimeError(f"the HTTP gateway with auth {auth} did not start:\n{log}") from None
            urls = {"token": token_url, "tokens": tokens_url, "jwt": jwt_url}
            async with (
                stdio_session(gateway_params(configs["token"], None)) as stdio,
                http_session(urls["token"], tokens["token"]) as token,
                http_session(urls["tokens"], tokens["tokens"]) as person,
                http_session(urls["jwt"], tokens["jwt"]) as jwt,
            ):
                sessions = {"stdio": stdio, "http_token": token, "http_tokens": person, "http_jwt": jwt}
                targets = {
                    name: (lambda s=session: tools_call(s, "call_tool", call)) for name, session in sessions.items()
                }
                for one in targets.values():  # warm-up: imports, tool lists, the JWKS, caches
                    await throughput(one, 50, 1)
                for name, (p50, p95) in (await interleaved_percentiles(targets, calls)).items():
                    results[f"{name}_p50_ms"], results[f"{name}_p95_ms"] = p50, p95
    finally:
        issuer.stop()
    for auth in AUTHS:
        results[f"http_{auth}_vs_stdio_p50"] = results[f"http_{auth}_p50_ms"] / results["stdio_p50_ms"]
    return results


ROWS = (
    ("call_tool p50 / p95 over stdio", "{stdio_p50_ms:.2f} / {stdio_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, shared token", "{http_token_p50_ms:.2f} / {http_token_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, tokens file", "{http_tokens_p50_ms:.2f} / {http_tokens_p95_ms:.2f} ms", ""),
    ("call_tool p50 / p95 over HTTP, JWT", "{http_jwt_p50_ms:.2f} / {http_jwt_p95_ms:.2f} ms", ""),
    ("http_token_vs_stdio_p50", "{http_token_vs_stdio_p50:.2f}", "target <= 1.2"),
    ("http_tokens_vs_stdio_p50", "{http_tokens_vs_stdio_p50:.2f}", "target <= 1.2"),
    ("http_jwt_vs_stdio_p50", "{http_jwt_vs_stdio_p50:.2f}", "target <= 1.2"),
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
