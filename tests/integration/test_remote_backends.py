"""Remote backends: streamable HTTP and SSE against real servers, headers and bearer tokens, reconnects."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.conftest import AGENTIFY, error_code, gateway, gateway_env, text_of, wait_until
from tests.fakes.model_server import ModelServer, Reply
from tests.servers import everything, free_port, http_backend, server_process, stop, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "bearer-token-7f3a9c21e8d4b6a0SECRET"
HEADER_VALUE = "team-header-value-5e1d0c9b"
URL_LINE = re.compile(r"debug console: (http://\S+)/\?token=(\S+)")


def mcp_config(directory: Path, servers: dict[str, Any], **top: Any) -> Path:
    path = directory / "agentify.json"
    path.write_text(json.dumps({"mcpServers": servers, **top}))
    return path


async def backends(session: Any) -> dict[str, dict[str, Any]]:
    listing = await session.call_tool("list_backends", {})
    return {b["id"]: b | {"text": text_of(listing)} for b in (listing.structured_content or {})["backends"]}


async def call(session: Any, model: ModelServer, tool: str, arguments: dict[str, Any]) -> Any:
    model.push(Reply.tool_call(tool, arguments))
    return await session.call_tool("orchestrate_task", {"query": f"use {tool}"})


@pytest.mark.parametrize(
    ("mode", "entry"),
    [
        ("streamableHttp", lambda port: {"url": f"http://127.0.0.1:{port}/mcp"}),  # Cursor's spelling
        ("streamableHttp", lambda port: {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}),  # VS Code's
        ("sse", lambda port: {"serverUrl": f"http://127.0.0.1:{port}/sse"}),  # Windsurf's; /sse means SSE
    ],
    ids=["cursor-streamable-http", "vscode-http", "windsurf-sse"],
)
async def test_server_everything_over_http_and_sse(tmp_path: Path, model: ModelServer, mode: str, entry: Any) -> None:
    port = free_port()
    with server_process(everything(mode), tmp_path / "server.log", {"PORT": str(port)}):
        await wait_accepting(port)
        config = mcp_config(tmp_path, {"everything": entry(port)})
        async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
            result = await call(session, model, "everything__echo", {"message": "over the wire"})
            listed = (await backends(session))["everything"]
    assert not result.is_error, text_of(result)
    assert "over the wire" in text_of(result)
    assert listed["state"] == "ready" and "echo" in listed["tools"]
    assert listed["url"] == entry(port).get("url", entry(port).get("serverUrl"))


async def test_streamable_http_refused_falls_back_to_sse(tmp_path: Path, model: ModelServer) -> None:
    port = free_port()
    headers_log = tmp_path / "headers.jsonl"
    argv = http_backend(port, "--sse-only", "--headers-log", str(headers_log))
    with server_process(argv, tmp_path / "server.log"):
        await wait_accepting(port)
        config = mcp_config(tmp_path, {"old": {"url": f"http://127.0.0.1:{port}/events"}})
        async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
            result = await call(session, model, "old__echo", {"text": "via sse"})
    assert text_of(result) == "echo: via sse", text_of(result)
    methods = [json.loads(line)["method"] for line in headers_log.read_text().splitlines()]
    assert methods[0] == "POST" and "GET" in methods  # streamable HTTP tried first, then the SSE stream


async def test_bearer_and_headers_reach_the_server_and_no_secret_reaches_the_user(
    tmp_path: Path, model: ModelServer
) -> None:
    port = free_port()
    headers_log = tmp_path / "headers.jsonl"
    stderr = tmp_path / "stderr.log"
    traces = tmp_path / "traces.jsonl"
    argv = http_backend(port, "--headers-log", str(headers_log))
    with server_process(argv, tmp_path / "server.log", {"HTTP_BACKEND_TOKEN": TOKEN}):
        await wait_accepting(port)
        entry = {
            "id": "team",
            "url": f"http://127.0.0.1:{port}/mcp?access_token={TOKEN}",
            "headers": {"X-Team": "${TEAM_HEADER}"},
            "auth": {"type": "bearer", "token": "${TEAM_TOKEN}"},
        }
        config = tmp_path / "agentify.json"
        config.write_text(json.dumps({"backends": [entry], "traceFile": str(traces), "debugPort": free_port()}))
        env = gateway_env(model, TEAM_HEADER=HEADER_VALUE, TEAM_TOKEN=TOKEN)
        async with gateway(config, env, stderr) as session:
            result = await call(session, model, "team__echo", {"text": f"leak {TOKEN} {HEADER_VALUE}"})
            listed = (await backends(session))["team"]
            await wait_until(lambda: URL_LINE.search(stderr.read_text()) is not None)
            url, console_token = URL_LINE.search(stderr.read_text()).groups()  # type: ignore[union-attr]
            async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
                auth = {"Authorization": f"Bearer {console_token}"}
                console = [(await client.get(p, headers=auth)).text for p in ("/api/backends", "/api/config")]
    received = [json.loads(line)["headers"] for line in headers_log.read_text().splitlines()]
    assert received and all(h.get("authorization") == f"Bearer {TOKEN}" for h in received)
    assert all(h.get("x-team") == HEADER_VALUE for h in received)
    assert text_of(result).startswith("echo: leak"), text_of(result)
    assert listed["url"] == f"http://127.0.0.1:{port}/mcp?access_token=[REDACTED]"
    for secret in (TOKEN, HEADER_VALUE):
        for seen in (stderr.read_text(), traces.read_text(), text_of(result), json.dumps(listed), *console):
            assert secret not in seen
    assert f"127.0.0.1:{port}/mcp" in console[0]


async def test_wrong_bearer_token_is_backend_unavailable_naming_the_fix(tmp_path: Path, model: ModelServer) -> None:
    port = free_port()
    with server_process(http_backend(port), tmp_path / "server.log", {"HTTP_BACKEND_TOKEN": TOKEN}):
        await wait_accepting(port)
        entry = {"id": "team", "url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "bearer", "token": "wrong"}}
        config = tmp_path / "agentify.json"
        config.write_text(json.dumps({"backends": [entry]}))
        async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
            listed = (await backends(session))["team"]
            while listed["state"] in ("starting", "restarting", "stopped"):
                listed = (await backends(session))["team"]
    assert listed["state"] == "failed"
    assert "HTTP 401" in listed["lastError"] and "auth.token" in listed["lastError"]


@pytest.mark.parametrize(("mode", "path"), [("streamableHttp", "/mcp"), ("sse", "/sse")])
async def test_remote_server_killed_is_unavailable_at_once_and_works_again_after_restart(
    tmp_path: Path, model: ModelServer, mode: str, path: str
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    argv = everything(mode)
    env = {"PORT": str(port)}
    config = mcp_config(tmp_path, {"everything": {"url": f"http://127.0.0.1:{port}{path}", "timeoutSeconds": 300}})
    with server_process(argv, log, env) as first:
        await wait_accepting(port)
        async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
            assert not (await call(session, model, "everything__echo", {"message": "one"})).is_error
            stop(first)
            gone = await call(session, model, "everything__echo", {"message": "two"})
            assert error_code(gone) == "backend_unavailable", text_of(gone)
            assert f"127.0.0.1:{port}" in text_of(gone)
            with server_process(argv, log, env):
                await wait_accepting(port)
                with anyio.fail_after(60):
                    while (again := await call(session, model, "everything__echo", {"message": "three"})).is_error:
                        assert error_code(again) == "backend_unavailable", text_of(again)
                        await anyio.sleep(0.2)
                listed = (await backends(session))["everything"]
    assert "three" in text_of(again)
    assert listed["state"] == "ready" and listed["restarts"] >= 1


def test_doctor_shows_a_remote_backend_with_its_url_masked_and_why_it_is_down(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    entry = {"id": "team", "url": f"http://127.0.0.1:{port}/mcp?token={TOKEN}&team=blue"}
    config = tmp_path / "agentify.json"
    config.write_text(json.dumps({"backends": [entry]}))
    env = os.environ | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([str(AGENTIFY), "doctor", "--config", str(config)], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert f"http://127.0.0.1:{port}/mcp?token=[REDACTED]" in done.stdout
    assert "cannot connect" in done.stdout
    assert TOKEN not in done.stdout + done.stderr


@pytest.mark.parametrize(("status", "says"), [(401, "refused the credentials (HTTP 401)"), (403, "HTTP 403")])
async def test_an_sse_message_refused_fails_the_call_at_once_and_the_listing_shows_why(
    tmp_path: Path, model: ModelServer, status: int, says: str
) -> None:
    """The SSE stream stays open while the server refuses the POSTs: the call must not wait for its timeout."""
    port = free_port()
    with server_process(http_backend(port, "--sse-only"), tmp_path / "server.log"):
        await wait_accepting(port)
        entry = {"id": "old", "url": f"http://127.0.0.1:{port}/events", "transport": "sse", "timeoutSeconds": 120}
        config = tmp_path / "agentify.json"
        config.write_text(json.dumps({"backends": [entry]}))
        async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
            assert text_of(await call(session, model, "old__lock_out", {"status": status})).startswith("locked out")
            with anyio.fail_after(30):  # far below the call's timeout
                refused = await call(session, model, "old__echo", {"text": "after"})
                listed = (await backends(session))["old"]
                while listed["state"] == "ready":
                    listed = (await backends(session))["old"]
    assert error_code(refused) == "backend_unavailable" and says in text_of(refused), text_of(refused)
    assert listed["state"] == "failed" and says in listed["lastError"], listed
