"""What scripts/bench.py and its sections share: sessions, the gateway's process, timed loops, figures.

Timings are wall-clock on this machine; latencies are in milliseconds, RSS in KiB (from /proc).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.fakes.model_server import ModelServer  # noqa: E402

FS = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
AGENTIFY = REPO / ".venv/bin/agentify"
ROUNDS = 5
Call = Callable[[], Awaitable[Any]]


@asynccontextmanager
async def stdio_session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - instant, and errlog needs a real file
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def tools_call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> None:
    """tools/call as the gateway itself calls backends: `ClientSession.call_tool` would also
    validate results against the tool's output schema in this process, a cost the gateway's
    tools (no output schema) do not have, and so would skew the comparison."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
    result = await session.send_request(request, types.CallToolResult)
    assert not result.is_error, result


def gateway_params(
    config: Path, model: ModelServer | None, cache: Path | None = None, extra_env: dict[str, str] | None = None
) -> StdioServerParameters:
    """`agentify serve` with the offline planner, or with `model` (the scripted OpenAI-compatible server)."""
    env = {"AGENTIFY_LOG_LEVEL": "WARNING", "PATH": os.environ["PATH"]} | (extra_env or {})
    if model is None:
        env["AGENTIFY_PLANNER"] = "offline"
    else:
        env |= {"OPENAI_API_KEY": "sk-bench-0000000000", "OPENAI_BASE_URL": model.base_url}
    if cache is not None:
        env["AGENTIFY_CACHE_DIR"] = str(cache)
    return StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)


def fs_spec(backend_id: str, root: Path, **extra: Any) -> dict[str, Any]:
    return {"id": backend_id, "command": "node", "args": [str(FS), str(root)]} | extra


def write_config(path: Path, backends: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"backends": backends}))
    return path


async def states(session: ClientSession) -> dict[str, str]:
    """Each backend's state, as `list_backends` gives it."""
    listing = await session.call_tool("list_backends", {})
    return {b["id"]: b["state"] for b in (listing.structured_content or {})["backends"]}


async def wait_states(session: ClientSession, wanted: set[str], limit: float = 60.0) -> None:
    """Until every backend is in one of the `wanted` states."""
    with anyio.fail_after(limit):
        while not set((await states(session)).values()) <= wanted:  # noqa: ASYNC110 - another process's state
            await anyio.sleep(0.01)


# Timed loops


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p95)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(int(len(ordered) * 0.95) - 1, 0)]


async def timed_calls(call: Call, count: int) -> list[float]:
    """Milliseconds of each of `count` calls, one after another."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def throughput(call: Call, count: int, concurrency: int) -> float:
    """Calls per second of `count` calls, at most `concurrency` at once."""
    limiter = anyio.Semaphore(concurrency)

    async def one() -> None:
        async with limiter:
            await call()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    return count / (time.perf_counter() - start)


async def interleaved(measures: dict[str, Call], rounds: int = ROUNDS) -> dict[str, list[Any]]:
    """Runs each measure `rounds` times, in turn, so that load from elsewhere falls on all alike."""
    figures: dict[str, list[Any]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            figures[name].append(await measure())
    return figures


async def interleaved_percentiles(
    calls: dict[str, Call], count: int, rounds: int = ROUNDS
) -> dict[str, tuple[float, float]]:
    """(p50, p95) in ms of each call over `count` calls in all, measured in interleaved rounds."""
    per_round = max(count // rounds, 1)
    measures = {name: functools.partial(timed_calls, call, per_round) for name, call in calls.items()}
    figures = await interleaved(measures, rounds)
    return {name: percentiles([sample for one in samples for sample in one]) for name, samples in figures.items()}


# Processes, from /proc


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")  # a zombie has exited; only its parent has not reaped it


def gateway_pid() -> int:
    """The newest `agentify serve` process started by this benchmark (others may run their own)."""
    newest = (0.0, 0)
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(part.endswith(b"bin/agentify") for part in cmdline) and b"serve" in cmdline:
                newest = max(newest, (Path(f"/proc/{pid}").stat().st_mtime, pid))
        except OSError:
            continue
    if not newest[1]:
        raise RuntimeError("the gateway process was not found")
    return newest[1]


def cpu_seconds(pid: int) -> float:
    """CPU seconds a process has spent so far (user and system), 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(pid: int) -> int:
    """RSS of a process and all its descendants."""
    return sum(rss_kib(p) for p in {pid} | descendants(pid))
