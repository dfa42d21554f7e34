"""A client that asked for log messages gets agentify's own results, in both eras, over stdio and HTTP.

fastmcp, the MCP Inspector and many IDEs set a log level at once. Each call of such a client runs beside
a relay of the backend's log messages; what the call raises for the gateway's handlers (an unknown tool,
a planner that cannot decide, a refusal, a decline, the 2026-07-28 round-trip signal of roots, of a
confirmation and of a backend's own question) must still reach them as it was raised, and so reach the
client as an `isError` result or the next round, never as a protocol error.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client

from tests.conftest import REPO, error_code, fs_backend, gateway_env, text_of, write_config
from tests.integration.ide_client import LOGGED_MODES, ide_client, roots_of
from tests.integration.team import http_client, http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ASKING = REPO / "tests/fakes/asking_backend.py"
TOKEN = "log-level-token-0123456789abcdef"


class Person:
    """The IDE's user: declines agentify's first confirmation, accepts the next, and a backend's question."""

    def __init__(self) -> None:
        self.answers = ["decline", "accept"]
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        action = "accept" if params.message.startswith("From backend ask") else self.answers.pop(0)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)  # type: ignore[arg-type]


async def call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert isinstance(result, types.CallToolResult), result
    return result


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", LOGGED_MODES)
async def test_every_gateway_outcome_reaches_a_client_that_set_a_log_level(
    tmp_path: Path, workspace: Path, mode: str, transport: str
) -> None:
    backends = [fs_backend(workspace), {"id": "ask", "command": sys.executable, "args": [str(ASKING)]}]
    config = write_config(tmp_path, backends, planner={"provider": "offline"})
    person = Person()
    target = workspace / "out.txt"
    write = {"path": str(target), "content": "new text"}
    async with clients(transport, config, tmp_path) as connect:
        async with connect(mode, elicitation_callback=person.elicit, list_roots_callback=roots_of(workspace)) as ide:
            unknown = await call(ide, "nosuch__tool", {})
            undecided = await ide.call_tool("orchestrate_task", {"query": "make me a sandwich"})
            from_root = await ide.call_tool("orchestrate_task", {"query": "read notes.txt"})
            declined = await call(ide, "fs__write_file", write)
            written_after_decline = target.exists()
            confirmed = await call(ide, "fs__write_file", write)
            question = await call(ide, "ask__confirm", {"path": "old.txt"})
        async with connect(mode) as cannot_confirm:
            refused = await call(cannot_confirm, "fs__write_file", {"path": str(workspace / "no.txt"), "content": "x"})
    assert error_code(unknown) == "invalid_input" and "nosuch__tool" in text_of(unknown), unknown
    assert error_code(undecided) in ("planner_unavailable", "no_plan"), undecided
    assert text_of(from_root) == "remember the milk\n", from_root  # the roots' round trip, then the read
    assert error_code(declined) == "denied" and "you declined" in text_of(declined), declined
    assert not written_after_decline
    assert not confirmed.is_error and target.read_text() == "new text", confirmed
    assert text_of(question) == "deleted old.txt", question
    assert person.asked[-1] == "From backend ask (not agentify): Delete old.txt?"
    assert error_code(refused) == "denied" and "cannot ask" in text_of(refused), refused
    assert not (workspace / "no.txt").exists()


def clients(transport: str, config: Path, tmp_path: Path) -> AbstractAsyncContextManager[Any]:
    """`connect(mode, **options)`: a new client of one gateway (HTTP), or of its own gateway (stdio, as IDEs)."""
    return _http_clients(config, tmp_path) if transport == "http" else _stdio_clients(config, tmp_path)


@asynccontextmanager
async def _stdio_clients(config: Path, tmp_path: Path) -> AsyncIterator[Any]:
    def connect(mode: str, **options: Any) -> AbstractAsyncContextManager[Client]:
        return ide_client(config, gateway_env(None), tmp_path / "e.log", mode, **options)

    yield connect


@asynccontextmanager
async def _http_clients(config: Path, tmp_path: Path) -> AsyncIterator[Any]:
    async with http_gateway(config, tmp_path / "e.log", {"AGENTIFY_HTTP_TOKEN": TOKEN}) as gateway:

        def connect(mode: str, **options: Any) -> AbstractAsyncContextManager[Client]:
            return http_client(gateway.url, TOKEN, mode, **options)

        yield connect
