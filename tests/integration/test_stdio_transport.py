"""The gateway's stdio: on pipes (what IDEs give) the event loop's own transport, elsewhere the SDK's.

The MCP clients of the other tests all speak over pipes; these speak raw JSON-RPC lines, as an IDE
that misbehaves or a shell redirection would."""

from __future__ import annotations

import json
import socket
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


def test_from_a_file_the_sdks_transport_serves(tmp_path: Path) -> None:
    """At the file's end stdin has ended: what is still being answered then is cancelled, as over any
    transport when the client goes; `initialize` is answered before the next line is read."""
    config = write_config(tmp_path, [])
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_lines(INITIALIZE, INITIALIZED, LIST))
    with requests.open("rb") as stdin:
        replies = {reply["id"]: reply for reply in _serve(config, stdin)}
    assert replies[1]["result"]["serverInfo"]["name"] == "agentify"


def test_on_a_pipe_a_message_over_32_mib_is_answered_as_unreadable_and_serving_goes_on(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    huge = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "' + b"x" * (33 << 20) + b'"}}'
    replies = _serve(config, subprocess.PIPE, _lines(INITIALIZE, INITIALIZED, huge, LIST))
    by_id = {reply.get("id"): reply for reply in replies}
    assert by_id[1]["result"]["serverInfo"]["name"] == "agentify"
    # Never parsed, but its id was found at its start: the client's request is answered, not left waiting.
    assert by_id[7]["error"]["code"] == -32700 and "over the 32 MiB limit" in by_id[7]["error"]["message"]
    assert "orchestrate_task" in [tool["name"] for tool in by_id[2]["result"]["tools"]]


def test_on_a_pipe_bytes_that_are_not_utf8_are_replaced_as_the_sdks_transport_does(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    call = b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "caf\xe9", "arguments": {}}}'
    served = _serve(config, subprocess.PIPE, _lines(INITIALIZE, INITIALIZED, call))
    replies = {reply.get("id"): reply for reply in served}
    result = replies[3]["result"]  # read and answered: an unknown tool, not an unreadable message
    assert result["isError"] and "caf\ufffd" in result["content"][0]["text"]


def test_on_one_socket_for_both_stdin_and_stdout_every_request_is_answered(tmp_path: Path) -> None:
    """socat and inetd give a server one socket as stdin and stdout: the SDK's transport serves it."""
    config = write_config(tmp_path, [])
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = subprocess.Popen(
            [str(AGENTIFY), "serve", "--config", str(config)],
            stdin=theirs,
            stdout=theirs,
            stderr=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin", "AGENTIFY_PLANNER": "offline"},
        )
        theirs.close()
        try:
            ours.sendall(_lines(INITIALIZE, INITIALIZED, LIST, {**LIST, "id": 3}))
            replies: dict[Any, dict[str, Any]] = {}
            pending = b""
            ours.settimeout(60)
            while not {1, 2, 3} <= set(replies):  # each recv bounded by the timeout; EOF ends it
                chunk = ours.recv(1 << 16)
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                replies |= {reply.get("id"): reply for reply in map(json.loads, lines)}
            ours.shutdown(socket.SHUT_WR)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert replies[1]["result"]["serverInfo"]["name"] == "agentify"
    assert replies[2]["result"]["tools"] == replies[3]["result"]["tools"] != []
