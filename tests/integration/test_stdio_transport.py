"""The gateway's stdio: on pipes (what IDEs give) the event loop's own transport, elsewhere the SDK's.

The MCP clients of the other tests all speak over pipes; these speak raw JSON-RPC lines, as an IDE
that misbehaves or a shell redirection would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, write_config

pytestmark = pytest.mark.integration

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _serve(config: Path, stdin: Any, data: bytes | None = None) -> list[dict[str, Any]]:
    """Every reply the gateway writes until its stdin ends, each line parsed (stdout holds only JSON-RPC)."""
    process = subprocess.Popen(
        [str(AGENTIFY), "serve", "--config", str(config)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "AGENTIFY_PLANNER": "offline"},
    )
    try:
        out, _ = process.communicate(data, timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 0
    return [json.loads(line) for line in out.splitlines()]


def _lines(*messages: dict[str, Any] | bytes) -> bytes:
    return b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages)


def test_from_a_file_the_sdks_transport_serves_and_answers_everything_before_the_end(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_lines(INITIALIZE, INITIALIZED, LIST))
    with requests.open("rb") as stdin:
        replies = {reply["id"]: reply for reply in _serve(config, stdin)}
    assert replies[1]["result"]["serverInfo"]["name"] == "agentify"
    assert "orchestrate_task" in [tool["name"] for tool in replies[2]["result"]["tools"]]


def test_on_a_pipe_a_message_over_32_mib_is_answered_as_unreadable_and_serving_goes_on(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    huge = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "' + b"x" * (33 << 20) + b'"}}'
    replies = _serve(config, subprocess.PIPE, _lines(INITIALIZE, INITIALIZED, huge, LIST))
    by_id = {reply.get("id"): reply for reply in replies}
    assert by_id[1]["result"]["serverInfo"]["name"] == "agentify"
    assert by_id[None]["error"]["code"] == -32700 and "over the 32 MiB limit" in by_id[None]["error"]["message"]
    assert 7 not in by_id  # never parsed: its id is unknown, as it is for any unreadable line
    assert "orchestrate_task" in [tool["name"] for tool in by_id[2]["result"]["tools"]]
