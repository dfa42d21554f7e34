"""A backend that asks its user and the client's model, in the era and the way a test chooses.

    python asking_backend.py [--era both|modern|legacy] [--ask natural|request] [--port N] [--marker FILE]

--era modern refuses `initialize` (a 2026-07-28-only server); --era legacy answers `server/discover`
with "method not found" before the SDK sees it (a 2025-11-25-only server, as older SDKs are).
--ask natural asks with an `InputRequiredResult` on 2026-07-28 sessions and by request on 2025-11-25
ones; --ask request always asks by request (the trap: it fails on 2026-07-28 with "no back-channel").
--describe TEXT sets its description of itself. Over stdio without --port, else streamable HTTP at http://127.0.0.1:N/mcp.

Tools: era() names the session's protocol; confirm(path) asks a form question ("deleted" on accept,
else "kept", and its own fallback text when the question fails); login() asks a URL-mode question;
summarize(text) asks the client's model (sampling); wait(seconds) only waits. --marker records one line
per question asked ("asked <tool>") and per call that ran to its end ("<result text>"). Resource `ask://broken` fails
to read, with an error whose message and data echo the API_KEY of its env, far past any bound.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.version import is_version_at_least

MODERN = "2026-07-28"


def build(ask_mode: str, era: str, marker: str | None = None) -> Server[Any]:
    def mark(line: str) -> None:
        if marker:
            with open(marker, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        empty: dict[str, Any] = {"type": "object"}
        text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        path = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        seconds = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="era", description="Name the protocol of this session", input_schema=empty),
                types.Tool(name="confirm", description="Delete a file after asking the user", input_schema=path),
                types.Tool(name="login", description="Log in through a web page", input_schema=empty),
                types.Tool(name="summarize", description="Summarize a text with the client's model", input_schema=text),
                types.Tool(name="wait", description="Wait some seconds", input_schema=seconds),
            ]
        )

    async def ask(ctx: Any, params: types.CallToolRequestParams, request: types.InputRequest, kind: type[Any]) -> Any:
        """The answer, or an InputRequiredResult to return; raises MCPError when asking failed."""
        modern = is_version_at_least(ctx.session.protocol_version or "2025-11-25", MODERN)
        if modern and ask_mode == "natural":
            answer = (params.input_responses or {}).get("q")
            if answer is None:
                return types.InputRequiredResult(input_requests={"q": request}, request_state="asked-once")
            return kind.model_validate(answer.model_dump(by_alias=True, exclude_none=True))
        metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
        return await ctx.session.send_request(request, kind, metadata=metadata)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        if params.name == "era":
            return _text(f"era {ctx.session.protocol_version}")
        if params.name == "wait":
            await anyio.sleep(float(arguments["seconds"]))
            return _text(f"waited {os.getpid()}")
        if params.name == "confirm":
            form = types.ElicitRequestFormParams(
                message=f"Delete {arguments['path']}?", requested_schema={"type": "object", "properties": {}}
            )
            request: types.InputRequest = types.ElicitRequest(params=form)
            kind: type[Any] = types.ElicitResult
        elif params.name == "login":
            url = types.ElicitRequestURLParams(
                message="Log in to the fake service", url="https://login.example.test/", elicitation_id="login-1"
            )
            request, kind = types.ElicitRequest(params=url), types.ElicitResult
        else:
            sampling = types.CreateMessageRequestParams(
                messages=[
                    types.SamplingMessage(role="user", content=types.TextContent(type="text", text=arguments["text"]))
                ],
                max_tokens=50,
            )
            request, kind = types.CreateMessageRequest(params=sampling), types.CreateMessageResult
        mark(f"asked {params.name}")
        try:
            answer = await ask(ctx, params, request, kind)
        except NoBackChannelError:
            raise  # the trap: a server that asks only by request cannot ask on a 2026-07-28 session
        except MCPError as exc:  # this backend's own fallback when its question cannot be answered
            mark("fallback")
            return _text(f"fallback: could not ask ({exc.error.message})")
        if isinstance(answer, types.InputRequiredResult):
            return answer
        mark(f"answered {params.name}")
        if params.name == "confirm":
            verdict = "deleted" if answer.action == "accept" else f"kept ({answer.action})"
            return _text(f"{verdict} {arguments['path']}")
        if params.name == "login":
            return _text(f"login {answer.action}")
        content = answer.content
        return _text(f"summary: {content.text if isinstance(content, types.TextContent) else content}")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="ask://broken", name="broken")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        key = os.environ.get("API_KEY", "")
        data = {"echo": f"key={key}", "blob": "y" * 50_000}
        raise MCPError(types.INTERNAL_ERROR, f"cannot read with {key}: " + "x" * 50_000, data)

    server: Server[Any] = Server(
        "asking-fake",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    if era == "modern":
        server.middleware.append(_refuse_initialize)
    return server


async def _refuse_initialize(ctx: Any, call_next: Any) -> Any:
    if ctx.method == "initialize":
        data = {"supported": [MODERN], "requested": "2025-11-25"}
        raise MCPError(code=types.UNSUPPORTED_PROTOCOL_VERSION, message="this server speaks 2026-07-28 only", data=data)
    return await call_next(ctx)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _discover_refusal(message: dict[str, Any]) -> dict[str, Any] | None:
    """The "method not found" answer a 2025-11-25-only server gives to `server/discover`, else None."""
    if message.get("method") != "server/discover":
        return None
    error = {"code": types.METHOD_NOT_FOUND, "message": "Method not found: server/discover"}
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": error}


async def serve_stdio(server: Server[Any], legacy_only: bool) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        if not legacy_only:
            await server.run(read, write, server.create_initialization_options())
            return
        send, receive = anyio.create_memory_object_stream[Any](16)

        async def screen() -> None:
            async with send:
                async for item in read:
                    raw = item.message.model_dump(by_alias=True, exclude_none=True) if hasattr(item, "message") else {}
                    refusal = _discover_refusal(raw)
                    if refusal is None:
                        await send.send(item)
                    else:
                        await write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(refusal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(screen)
            await server.run(receive, write, server.create_initialization_options())
            tg.cancel_scope.cancel()


def serve_http(server: Server[Any], port: int, legacy_only: bool) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp")

    async def screened(scope: Any, receive: Any, send: Any) -> None:
        if not legacy_only or scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            refusal = _discover_refusal(json.loads(body))
        except (ValueError, AttributeError):
            refusal = None
        if refusal is not None:
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(refusal).encode()})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    uvicorn.run(screened, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["both", "modern", "legacy"], default="both")
    parser.add_argument("--ask", choices=["natural", "request"], default="natural")
    parser.add_argument("--port", type=int)
    parser.add_argument("--marker")
    parser.add_argument("--describe", help="the server's description of itself (serverInfo.description)")
    args = parser.parse_args()
    server = build(args.ask, args.era, args.marker)
    server.description = args.describe
    if args.port:
        serve_http(server, args.port, args.era == "legacy")
    else:
        anyio.run(serve_stdio, server, args.era == "legacy")


if __name__ == "__main__":
    main()
