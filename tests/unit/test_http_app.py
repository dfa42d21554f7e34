"""The MCP endpoint over HTTP (`mcp_server/http_app.py`): a 2025-11-25 request whose result comes alone is
answered with one JSON body; one that sends anything first (progress, a question to the client) or stays
silent gets the event stream. Served in process by uvicorn on 127.0.0.1, driven by raw HTTP and the SDK's
client."""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from agentify._common.listen import EmbeddedServer, listening_socket
from agentify.mcp_server import http_app
from agentify.mcp_server.http_app import mcp_app

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


@dataclass
class Gate:
    """Where the `slow` tool is: `entered` once called, and it answers once `release` is set."""

    entered: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)


def gated_server(gate: Gate) -> Server[Any]:
    """Tools: `quick` answers at once, `chatty` reports progress first, `ask` asks the client for its roots,
    `slow` waits at `gate`."""

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        text = params.name
        if params.name == "chatty":
            await ctx.session.report_progress(1, 2, "half way")
        elif params.name == "ask":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                text = ", ".join(str(root.uri) for root in (await ctx.session.list_roots()).roots)
        elif params.name == "slow":
            gate.entered.set()
            await gate.release.wait()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object"}
        return types.ListToolsResult(
            tools=[types.Tool(name=n, input_schema=schema) for n in ("quick", "chatty", "ask", "slow")]
        )

    server: Server[Any] = Server("t", on_call_tool=call_tool, on_list_tools=list_tools)
    return server


@asynccontextmanager
async def serving(gate: Gate | None = None, **options: Any) -> AsyncIterator[str]:
    gate = gate or Gate()
    listener = listening_socket("127.0.0.1", 0, 8)
    port = listener.getsockname()[1]
    config = uvicorn.Config(mcp_app(gated_server(gate), None, **options), log_config=None, lifespan="on")
    server = EmbeddedServer(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [listener])  # the socket listens already: requests queue until it serves
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            gate.release.set()
            server.should_exit = True


@asynccontextmanager
async def raw_session(url: str) -> AsyncIterator[httpx2.AsyncClient]:
    """A plain HTTP client in an initialized 2025-11-25 session (its headers carry the session id)."""
    async with httpx2.AsyncClient(headers=HEADERS, timeout=30) as client:
        opened = await client.post(url, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        client.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        client.headers["mcp-protocol-version"] = "2025-11-25"
        initialized = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202
        yield client


def call(name: str, request_id: int = 1, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}} | ({"_meta": meta} if meta else {})
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event stream, in order."""
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]


async def test_a_result_that_comes_alone_is_one_json_body() -> None:
    async with serving() as url, raw_session(url) as client:
        with anyio.fail_after(30):
            answer = await client.post(url, json=call("quick", 7))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["mcp-session-id"] == client.headers["mcp-session-id"]
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": "quick"}], "isError": False},
    }


async def test_progress_before_the_result_turns_the_answer_into_an_event_stream() -> None:
    async with serving() as url, raw_session(url) as client:
        with anyio.fail_after(30):
            answer = await client.post(url, json=call("chatty", 3, progressToken="p"))
    assert answer.headers["content-type"] == "text/event-stream"
    progress, result = events(answer.text)
    assert progress["method"] == "notifications/progress"
    assert progress["params"] == {"progressToken": "p", "progress": 1, "total": 2, "message": "half way"}
    assert result["id"] == 3 and result["result"]["content"][0]["text"] == "chatty"


async def test_a_question_to_the_client_goes_on_the_stream_and_its_answer_completes_the_call() -> None:
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    async with serving() as url, create_mcp_http_client() as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, list_roots_callback=roots) as session:
                with anyio.fail_after(30):
                    await session.initialize()
                    asked = await session.call_tool("ask", {})
                    quick = await session.call_tool("quick", {})
    assert [c.text for c in asked.content if isinstance(c, types.TextContent)] == ["file:///work/project"]
    assert [c.text for c in quick.content if isinstance(c, types.TextContent)] == ["quick"]


async def test_a_silent_call_gets_the_event_stream_and_keep_alives_until_its_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_app, "QUIET_SECONDS", 0.05)
    gate = Gate()
    async with serving(gate) as url, raw_session(url) as client:
        with anyio.fail_after(30):
            async with client.stream("POST", url, json=call("slow", 5)) as answer:
                assert answer.headers["content-type"] == "text/event-stream"
                chunks = answer.aiter_text()
                first = await anext(chunks)
                gate.release.set()
                rest = "".join([chunk async for chunk in chunks])
    assert first.startswith(": ping")
    assert [event["id"] for event in events(rest)] == [5]


async def test_a_call_in_flight_when_its_session_ends_is_told_so() -> None:
    gate = Gate()
    async with serving(gate) as url, raw_session(url) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                answers: list[httpx2.Response] = []

                async def slow_call() -> None:
                    answers.append(await client.post(url, json=call("slow", 9)))

                tg.start_soon(slow_call)
                await gate.entered.wait()
                assert (await client.delete(url)).status_code == 200
    assert answers[0].status_code == 500
    assert answers[0].json()["error"]["message"] == "Session terminated before the request completed"


@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000, b'{"jsonrpc": "2.0", "id": 1}'])
async def test_a_body_that_is_no_request_gets_the_sdk_answer_not_a_crash(body: bytes) -> None:
    async with serving() as url, raw_session(url) as client:
        with anyio.fail_after(30):
            answer = await client.post(url, content=body)
            after = await client.post(url, json=call("quick"))
    assert answer.status_code == 400 and answer.json()["error"]["code"] in (-32700, -32602)
    assert after.json()["result"]["content"][0]["text"] == "quick"


class Held:
    """What the replica is told of sessions (its drain waits for the held ones)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.ends: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    def opened(self, session: str) -> None:
        self.told.append(("opened", session))

    def ended(self, session: str) -> None:
        self.told.append(("ended", session))
        self.ends[session].set()


async def test_a_session_is_held_from_its_admission_until_its_delete_or_its_idle_timeout() -> None:
    held = Held()
    async with serving(held=held, idle_seconds=0.5) as url:
        async with raw_session(url) as client:
            deleted_id = client.headers["mcp-session-id"]
            assert held.told == [("opened", deleted_id)]
            with anyio.fail_after(30):
                deleted = await client.delete(url)
            assert deleted.status_code == 200 and ("ended", deleted_id) in held.told
        async with raw_session(url) as idle:
            idle_id = idle.headers["mcp-session-id"]
            with anyio.fail_after(30):
                await held.ends[idle_id].wait()
                gone = await idle.post(url, json=call("quick", 9))
    assert gone.status_code == 404  # the SDK discarded it: the hold ended with the session
    assert held.told.count(("opened", idle_id)) == 1
