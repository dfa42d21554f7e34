"""A backend with what the MCP conformance suite's server scenarios ask a server for.

The suite (`@modelcontextprotocol/conformance`, server scenarios) names tools, resources and
prompts and what each returns; this server offers them, so that the suite can be run against
agentify fronting it (`expose: ["tools"]`, `prefix: false`). Run alone over HTTP
(`--http PORT`), the suite checks the backend itself, which tells a fault of this file from one of
the gateway. By default it serves stdio, as a gateway backend.
"""

from __future__ import annotations

import argparse
import base64
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage

# A 1x1 red PNG and a silent one-sample WAV: the smallest valid payloads of each kind.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WAV = base64.b64encode(
    b"RIFF"
    + (38).to_bytes(4, "little")
    + b"WAVEfmt "
    + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little")
    + (2).to_bytes(2, "little")
    + (16).to_bytes(2, "little")
    + b"data"
    + (2).to_bytes(4, "little")
    + b"\x00\x00"
).decode()

server: MCPServer[Any] = MCPServer("conformance-backend", version="1.0")
subscribed: set[str] = set()


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


@server.tool(description="Returns simple text")
def test_simple_text() -> list[Any]:
    return [_text("This is a simple text response for testing.")]


@server.tool(description="Returns an image")
def test_image_content() -> list[Any]:
    return [types.ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool(description="Returns audio")
def test_audio_content() -> list[Any]:
    return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


def _embedded(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> list[Any]:
    return [_embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@server.tool(description="Returns text, an image and a resource")
def test_multiple_content_types() -> list[Any]:
    return [
        _text("Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        _embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
    ]


@server.tool(description="Logs three messages while it runs")
async def test_tool_with_logging(ctx: Context) -> str:
    for step, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if step:
            await anyio.sleep(0.05)
        await ctx.info(message)
    return "Tool with logging executed successfully"


@server.tool(description="Reports progress 0, 50 and 100 of 100")
async def test_tool_with_progress(ctx: Context) -> str:
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(0.05)
        await ctx.report_progress(progress, 100)
    return "Tool with progress executed successfully"


@server.tool(description="Always fails")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool(description="Asks the client's model")
async def test_sampling(prompt: str, ctx: Context) -> str:
    message = types.SamplingMessage(role="user", content=_text(prompt))
    result = await ctx.session.create_message([message], max_tokens=100)
    content = result.content
    said = content.text if isinstance(content, types.TextContent) else str(content)
    return f"LLM response: {said}"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema)  # type: ignore[arg-type]


@server.tool(description="Asks the user for a name and an email")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await _elicit(ctx, message, schema)
    return f"User response: <action: {answer.action}, content: {json.dumps(answer.content)}>"


@server.tool(description="Asks with a default for every primitive type")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = await _elicit(ctx, "Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


def _titled(prefix: str, titles: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"const": f"{prefix}{n}", "title": title} for n, title in enumerate(titles, 1)]


@server.tool(description="Asks with every kind of enum")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {
                "type": "string",
                "oneOf": _titled("value", ("First Option", "Second Option", "Third Option")),
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {"anyOf": _titled("value", ("First Choice", "Second Choice", "Third Choice"))},
            },
        },
    }
    answer = await _elicit(ctx, "Please select options from the enum fields", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@server.tool(description="Closes its response stream mid-call, then answers")
async def test_reconnection(ctx: Context) -> str:
    await ctx.close_sse_stream()
    await anyio.sleep(0.1)
    return "Reconnection test completed"


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    return f"name={name}, address={json.dumps(address)}"


def _schema_2020_12() -> None:
    """The listed schema keeps `$schema`, `$defs` and `$ref`, which a function signature cannot say."""
    tool = server._tool_manager.get_tool("json_schema_2020_12_tool")
    assert tool is not None
    tool.parameters = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    }


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A static PNG", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to")
def watched() -> str:
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template", description="Data by id", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.prompt(description="A prompt with no arguments")
def test_simple_prompt() -> list[Message]:
    return [UserMessage("This is a simple prompt for testing.")]


@server.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt(description="A prompt that embeds a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    embedded = _embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [UserMessage(embedded), UserMessage("Please process the embedded resource above.")]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[Message]:
    image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
    return [UserMessage(image), UserMessage("Please analyze the image above.")]


@server.completion()
async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
    words = ["paris", "park", "party"]
    return types.Completion(values=[w for w in words if w.startswith(argument.value)], total=3, has_more=False)


async def _subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


async def _set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    args = parser.parse_args()
    _schema_2020_12()
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
