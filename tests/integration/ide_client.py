"""The gateway driven by the SDK's high-level `Client`, in either protocol era, as IDEs on it do.

`mode="legacy"` speaks 2025-11-25 (initialize, server-to-client requests); `"auto"` discovers
2026-07-28 on this gateway, where confirmations and sampling are `InputRequiredResult` round
trips that `Client.call_tool` drives through the same callbacks.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.conftest import AGENTIFY, REPO

MODES = ("legacy", "auto")
ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
LOGGING = "+logs"
"""A mode with this suffix is a client that asked for log messages, as fastmcp, the Inspector and many IDEs do:
`logging/setLevel` at once in 2025-11-25, the per-request level in 2026-07-28 (`Client(log_level=...)`)."""
LOGGED_MODES = tuple(mode + LOGGING for mode in MODES)


def era_of(mode: str) -> str:
    """The plain mode ("legacy" or "auto") of `mode`, with or without a log level."""
    return mode.removesuffix(LOGGING)


def logging_options(mode: str, options: dict[str, Any]) -> dict[str, Any]:
    """The `Client` options of `mode`: a 2026-07-28 client with a log level sends it with every request."""
    if mode.endswith(LOGGING) and era_of(mode) == "auto":
        return {"log_level": "debug"} | options
    return options


async def ask_for_logs(client: Client, mode: str) -> None:
    """A 2025-11-25 client with a log level sets it first, as clients that show server logs do."""
    if mode.endswith(LOGGING) and era_of(mode) == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("debug")


@asynccontextmanager
async def ide_client(
    config: Path, env: dict[str, str], stderr: Path, mode: str, **options: Any
) -> AsyncIterator[Client]:
    env = {"AGENTIFY_STATE_DIR": str(stderr.parent / "state")} | env  # never the user's pins
    params = StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)
    with stderr.open("a") as errlog, warnings.catch_warnings():
        # Roots and sampling are deprecated in 2026-07-28, but still what a client declares to offer them.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        client_options = logging_options(mode, options)
        async with Client(stdio_client(params, errlog=errlog), mode=era_of(mode), **client_options) as client:
            assert client.protocol_version == ERAS[era_of(mode)], client.protocol_version
            await ask_for_logs(client, mode)
            yield client


def answering(action: str, seen: list[types.ElicitRequestParams] | None = None) -> Any:
    """An elicitation callback that answers every form with `action` (accept sends an empty form)."""

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if seen is not None:
            seen.append(params)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)  # type: ignore[arg-type]

    return elicit


def roots_of(*paths: Path) -> Any:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in paths])  # type: ignore[arg-type]

    return list_roots


TS_CLIENT = REPO / "node_modules/@modelcontextprotocol/client/package.json"
TS_SCRIPT = REPO / "tests/ts_client.mjs"


async def ts_client(spec: dict[str, Any], seconds: float = 60) -> dict[str, Any]:
    """The TypeScript v2 client (tests/ts_client.mjs) run once with `spec`, for at most `seconds`: its one line of
    JSON, checked for the era `spec["mode"]` names."""
    if not TS_CLIENT.exists():
        pytest.fail(f"{TS_CLIENT} is missing: run scripts/setup.sh (npm install) first")
    node = shutil.which("node") or pytest.fail("node is not on PATH")
    with anyio.fail_after(seconds):
        done = await anyio.run_process([node, str(TS_SCRIPT), json.dumps(spec)], cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    assert answer["protocolVersion"] == ERAS[spec["mode"]]
    return answer


async def every_resource(client: Client) -> list[types.Resource]:
    """Every resource the gateway lists, page after page (bounded)."""
    found: list[types.Resource] = []
    cursor: str | None = None
    with anyio.fail_after(30):
        while True:
            page = await client.list_resources(cursor=cursor, cache_mode="bypass")
            found.extend(page.resources)
            if not (cursor := page.next_cursor):
                return found
