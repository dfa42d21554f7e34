"""The client under test for the conformance suite's client scenarios: agentify, pointed at the URL.

`conformance client --command "python agentify_client.py"` starts a test server per scenario and
runs this with its URL as the last argument (the scenario's name and context in
MCP_CONFORMANCE_SCENARIO / MCP_CONFORMANCE_CONTEXT). This writes an agentify config with that URL
as a remote backend, authorizes with `agentify auth` when the scenario is about auth (the
"browser" is this script's `--open`, which follows the authorization server's redirects to
agentify's callback, as a user's browser would), then drives `agentify serve` over stdio with the
official Python client, as an IDE does, and calls the backend's tool through the gateway. When a
call leaves the backend needing authorization (a scope step-up), it runs `agentify auth` again, as
the gateway's message says, and calls once more.

Like the suite's own example client, it names a client metadata document URL for every auth
scenario; agentify uses it only where the server supports them, and registers elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

AGENTIFY = Path(sys.executable).with_name("agentify")
ARGUMENTS = {"add_numbers": {"a": 5, "b": 3}}
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"  # the one auth/basic-cimd expects


def open_in_browser(url: str) -> None:
    """What the user's browser does with the authorization URL: follow redirects to the callback."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        answer.read()


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


async def accept_with_defaults(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A user who accepts the form as it is offered: every field at its default."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
    return types.ElicitResult(action="accept", content=content)


async def drive(config: Path, env: dict[str, str], login: Callable[[], None] | None) -> None:
    params = StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=accept_with_defaults) as session:
            with anyio.fail_after(120):
                await session.initialize()
                names = _tool_names(await _settled(session))
                print("tools through agentify:", names, file=sys.stderr)
                asked = await _call_each(session, names)
                # As a user does: a call that says to run `agentify auth` (a scope step-up), or a backend left
                # needing authorization. The call's answer comes before the backend's state says so.
                if login is not None and (asked or any(b["state"] == "needs_auth" for b in await _settled(session))):
                    await anyio.to_thread.run_sync(login)
                    await _call_each(session, names)


async def _settled(session: ClientSession) -> list[dict[str, Any]]:
    """The backends once none is starting; the caller's fail_after bounds the wait."""
    while True:
        listed = await session.call_tool("list_backends", {})
        backends: list[dict[str, Any]] = (listed.structured_content or {}).get("backends", [])
        if all(b["state"] not in ("starting", "restarting") for b in backends):
            return backends
        await anyio.sleep(0.2)


async def _call_each(session: ClientSession, names: list[str]) -> bool:
    """Calls every tool; True when a call failed asking for `agentify auth`."""
    asked = False
    for name in names:
        tool = name.split("__", 1)[1]
        result = await session.call_tool("call_tool", {"name": name, "arguments": ARGUMENTS.get(tool, {})})
        texts = [getattr(b, "text", "") for b in result.content]
        print(name, "->", texts, file=sys.stderr)
        asked = asked or (result.is_error is True and any("agentify auth" in text for text in texts))
    return asked


def _tool_names(backends: list[dict[str, Any]]) -> list[str]:
    return [f"{b['id']}__{tool}" for b in backends for tool in b.get("tools", [])]


def main() -> int:
    if sys.argv[1:2] == ["--open"]:
        open_in_browser(sys.argv[2])
        return 0
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="agentify-conformance-") as scratch:
        home = Path(scratch)
        config = home / "agentify.json"
        config.write_text(json.dumps(config_for(url, scenario, context)))
        env = os.environ | {
            "AGENTIFY_CONFIG_DIR": str(home / "config"),
            "AGENTIFY_CACHE_DIR": str(home / "cache"),
            "BROWSER": f"{sys.executable} {Path(__file__).resolve()} --open %s",
        }
        env.pop("OPENAI_API_KEY", None)

        def login() -> None:
            done = subprocess.run(
                [str(AGENTIFY), "auth", "target", "--config", str(config)],
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=100,
                check=False,
            )
            if done.returncode != 0:
                print(f"agentify auth exited {done.returncode}", file=sys.stderr)

        auth = scenario.startswith("auth/")
        if auth:
            login()
        anyio.run(drive, config, env, login if auth else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
