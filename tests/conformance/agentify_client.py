"""The client under test for the conformance suite's client scenarios: agentify, pointed at the URL.

`conformance client --command "python agentify_client.py"` starts a test server per scenario and
runs this with its URL as the last argument (the scenario's name and context in
MCP_CONFORMANCE_SCENARIO / MCP_CONFORMANCE_CONTEXT). This writes an agentify config with that URL
as a remote backend, then drives `agentify serve` over stdio with the official Python client, as an
IDE does, and calls the backend's tool through the gateway (for an auth scenario, once from an IDE
of each protocol era; the backend's era is the scenario's). Nobody runs `agentify auth`: where
the server asks for authorization (at first, and for a scope step-up), the gateway asks this client
to open a URL (URL-mode elicitation), and the "browser" here follows it, with its cookies, through
the gateway's own start route and the suite's authorization server (which approves at once) back to
the gateway's callback, as a user's browser would. The suite's auth servers all offer `test-tool`:
before the first authorization the server refuses even to list its tools, so the client calls that
tool by name, as a user who knows the backend does.

Like the suite's own example client, it names a client metadata document URL for every auth
scenario; agentify uses it only where the server supports them, and registers elsewhere.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

AGENTIFY = Path(sys.executable).with_name("agentify")
ARGUMENTS = {"add_numbers": {"a": 5, "b": 3}}
AUTH_TOOL = "test-tool"  # what every auth scenario's server offers
ERAS = ("2025-11-25", "2026-07-28")
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"  # the one auth/basic-cimd expects


def open_in_browser(url: str) -> int:
    """What the user's browser does with the URL it is asked to open: follows the redirects, with its cookies (the
    gateway's start route binds the browser to the callback by one), to the gateway's callback page."""
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        with browser.open(url, timeout=30) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        print(f"the browser got HTTP {refused.code} at {refused.url}", file=sys.stderr)
        return refused.code


def config_for(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    backend: dict[str, Any] = {"id": "target", "url": url}
    if scenario.startswith("auth/"):
        auth: dict[str, Any] = {"type": "oauth", "clientMetadataUrl": CLIENT_METADATA_URL}
        if "client_id" in context:
            auth["clientId"] = context["client_id"]
        if "client_secret" in context:
            auth["clientSecret"] = context["client_secret"]
        backend["auth"] = auth
    return {"backends": [backend]}


async def answer_as_a_user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A user who opens the page they are sent to (and accepts), and accepts a form as it is offered: every field
    at its default."""
    if isinstance(params, types.ElicitRequestURLParams):
        print("asked to open", params.url.split("?")[0], "-", params.message, file=sys.stderr)
        status = await anyio.to_thread.run_sync(open_in_browser, params.url)
        print("the browser ended at HTTP", status, file=sys.stderr)
        return types.ElicitResult(action="accept")
    schema = getattr(params, "requested_schema", None) or {}
    content = {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
    return types.ElicitResult(action="accept", content=content)


async def drive(config: Path, env: dict[str, str], auth: bool) -> None:
    """Each era an IDE may speak with the gateway (the backend's is the scenario's), from a fresh state, so each
    authorizes by URL: the tools, each called once. A scenario without auth is one 2025-11-25 IDE's (its server
    counts what one client does)."""
    for era in ERAS if auth else ERAS[:1]:
        fresh = env | {"AGENTIFY_CONFIG_DIR": str(config.parent / era / "config")}
        params = StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=fresh)
        mode = "legacy" if era == ERAS[0] else "auto"
        async with Client(stdio_client(params), mode=mode, elicitation_callback=answer_as_a_user) as client:
            with anyio.fail_after(150):
                print("the gateway speaks", client.protocol_version, file=sys.stderr)
                names = _tool_names(await _settled(client))
                if auth and not names:  # the server refuses to list them before anyone authorized
                    names = [f"target__{AUTH_TOOL}"]
                print("tools through agentify:", names, file=sys.stderr)
                await _call_each(client, names)


async def _settled(client: Client) -> list[dict[str, Any]]:
    """The backends once none is starting; the caller's fail_after bounds the wait."""
    while True:
        listed = await client.call_tool("list_backends", {})
        backends: list[dict[str, Any]] = (listed.structured_content or {}).get("backends", [])
        if all(b["state"] not in ("starting", "restarting") for b in backends):
            return backends
        await anyio.sleep(0.2)


async def _call_each(client: Client, names: list[str]) -> None:
    for name in names:
        tool = name.split("__", 1)[1]
        result = await client.call_tool("call_tool", {"name": name, "arguments": ARGUMENTS.get(tool, {})})
        texts = [getattr(b, "text", "") for b in result.content]
        print(name, "->", texts, file=sys.stderr)


def _tool_names(backends: list[dict[str, Any]]) -> list[str]:
    return [f"{b['id']}__{tool}" for b in backends for tool in b.get("tools", [])]


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="agentify-conformance-") as scratch:
        home = Path(scratch)
        config = home / "agentify.json"
        config.write_text(json.dumps(config_for(url, scenario, context)))
        env = os.environ | {
            "AGENTIFY_CACHE_DIR": str(home / "cache"),
            "AGENTIFY_STATE_DIR": str(home / "state"),  # never the user's pins
            "BROWSER": "false",  # nothing may open a browser: the IDE (this client) is asked to
        }
        env.pop("OPENAI_API_KEY", None)
        anyio.run(drive, config, env, scenario.startswith("auth/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
