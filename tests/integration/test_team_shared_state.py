"""Two replicas of one team gateway share a 2026-07-28 round trip: a confirmation that one asked for is
answered at the other (the state sealed with `AGENTIFY_STATE_KEYS`), and the answer counts once across
both (the ledger in Redis)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import error_code, fs_backend, text_of, write_config
from tests.integration.team import add_token, http_client, http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.integration]
KEYS = {"AGENTIFY_STATE_KEYS": hashlib.sha256(b"new").hexdigest() + "," + hashlib.sha256(b"old").hexdigest()}
ACCEPT = types.ElicitResult(action="accept", content={})


async def never_called(context: Any, params: Any) -> Any:
    """Declares elicitation; the round trips are driven by hand."""
    raise AssertionError("the round trips are driven by hand")


async def _ask(url: str, token: str, arguments: dict[str, Any], **round_trip: Any) -> Any:
    """The result, or the protocol error the client got instead."""
    async with http_client(url, token, "auto", elicitation_callback=never_called) as client:
        try:
            return await client.session.call_tool("call_tool", arguments, allow_input_required=True, **round_trip)
        except MCPError as exc:
            return exc


async def _two_replicas_answer(tmp_path: Path, workspace: Path, redis: Any, keys: list[dict[str, str]]) -> list[Any]:
    """Replica one asks to confirm a write, replica two gets the answer, then replica one gets it too."""
    server = {"auth": {"type": "tokens", "file": "tokens.json"}, "redis": redis.url}
    config = write_config(tmp_path, [fs_backend(workspace)], planner={"provider": "offline"}, server=server)
    alice = await add_token(tmp_path / "tokens.json", "alice")
    write = {"name": "fs__write_file", "arguments": {"path": str(workspace / "out.txt"), "content": "new text"}}
    async with (
        http_gateway(config, tmp_path / "one.log", keys[0]) as one,
        http_gateway(config, tmp_path / "two.log", keys[1]) as two,
    ):
        asked = await _ask(one.url, alice, write)
        assert isinstance(asked, types.InputRequiredResult), asked
        ((question, _),) = (asked.input_requests or {}).items()
        answer = {"input_responses": {question: ACCEPT}, "request_state": asked.request_state}
        at_two = await _ask(two.url, alice, write, **answer)
        replayed_at_one = await _ask(one.url, alice, write, **answer)
    return [at_two, replayed_at_one]


async def test_a_confirmation_asked_by_one_replica_is_answered_at_another_once(
    tmp_path: Path, workspace: Path, redis: Any
) -> None:
    at_two, replayed = await _two_replicas_answer(tmp_path, workspace, redis, [KEYS, KEYS])
    assert isinstance(at_two, types.CallToolResult) and not at_two.is_error, at_two
    assert (workspace / "out.txt").read_text() == "new text"
    assert error_code(replayed) == "invalid_input" and "already used" in text_of(replayed)


async def test_replicas_without_shared_keys_refuse_each_others_round_trips(
    tmp_path: Path, workspace: Path, redis: Any
) -> None:
    at_two, at_one = await _two_replicas_answer(tmp_path, workspace, redis, [{}, {}])
    assert isinstance(at_two, MCPError) and "Invalid or expired requestState" in str(at_two), at_two
    # Only the replica that asked can open its own state: there the answer runs the call.
    assert isinstance(at_one, types.CallToolResult) and not at_one.is_error, at_one
    assert (workspace / "out.txt").read_text() == "new text"
