"""fastmcp's client with its defaults, as its users start agentify over stdio: it speaks 2026-07-28 and asks
for debug logs with every request. Its first `orchestrate_task` (the roots' round trip), a confirmation and a
backend's own question all reach agentify's results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StdioTransport

from tests.conftest import AGENTIFY, REPO, error_code, fs_backend, gateway_env, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ASKING = REPO / "tests/fakes/asking_backend.py"


async def test_fastmcp_default_client_plans_confirms_and_answers_a_backend(tmp_path: Path, workspace: Path) -> None:
    backends = [fs_backend(workspace), {"id": "ask", "command": sys.executable, "args": [str(ASKING)]}]
    config = write_config(tmp_path, backends, planner={"provider": "offline"})
    asked: list[str] = []

    async def elicit(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult[Any]:
        asked.append(message)
        return ElicitResult(action="accept", content={})

    transport = StdioTransport(
        command=str(AGENTIFY), args=["serve", "--config", str(config)], env=gateway_env(None), keep_alive=False
    )
    target = workspace / "out.txt"
    async with Client(transport, roots=[workspace.as_uri()], elicitation_handler=elicit) as client:
        first = await client.call_tool("orchestrate_task", {"query": "read notes.txt"}, raise_on_error=False)
        write = {"name": "fs__write_file", "arguments": {"path": str(target), "content": "new text"}}
        confirmed = await client.call_tool("call_tool", write, raise_on_error=False)
        question = await client.call_tool(
            "call_tool", {"name": "ask__confirm", "arguments": {"path": "old.txt"}}, raise_on_error=False
        )
        unknown = await client.call_tool("call_tool", {"name": "nosuch__tool", "arguments": {}}, raise_on_error=False)
    assert text_of(first) == "remember the milk\n", first
    assert not confirmed.is_error and target.read_text() == "new text", confirmed
    assert text_of(question) == "deleted old.txt", question
    assert asked[-1] == "From backend ask (not agentify): Delete old.txt?" and len(asked) == 2
    assert error_code(unknown) == "invalid_input", unknown
