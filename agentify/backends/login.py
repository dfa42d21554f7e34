"""`agentify auth BACKEND`: the OAuth browser flow with a loopback redirect, driven by the SDK's provider.

The authorization URL is printed on stderr (and opened with `webbrowser` when possible); the
authorization server redirects the browser to http://127.0.0.1:PORT/callback, served here by a
one-route Starlette app under uvicorn. The SDK's provider then exchanges the code (PKCE) and
stores the tokens through `TokenFile`. Finally one MCP session proves they work.
"""

from __future__ import annotations

import html
import socket
import sys
import webbrowser
from contextlib import suppress
from urllib.parse import parse_qs, urlsplit

import anyio
import mcp_types as types
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from agentify import __version__
from agentify.backends.oauth import TokenFile, preregister, provider_for
from agentify.backends.remote import RemoteConnection
from agentify.config import BackendConfig

BROWSER_WAIT_SECONDS = 300.0  # how long the user has to finish in the browser
_DONE = "<html><body><h1>agentify: authorized</h1><p>You can close this window.</p></body></html>"


class LoginFailed(Exception):
    """The flow could not be completed; the message says why and what to do."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def login(spec: BackendConfig) -> int:
    """Runs the flow for one OAuth backend; returns how many tools it lists with the new tokens.

    Raises:
        LoginFailed.
    """
    store = TokenFile(spec)
    previous = store.redirect_uri()
    port = urlsplit(previous).port if previous else None
    redirect_uri = f"http://127.0.0.1:{port or _free_port()}/callback"
    await preregister(spec, store, redirect_uri)
    send, receive = anyio.create_memory_object_stream[AuthorizationCodeResult](1)
    expected: list[str] = []  # the `state` of the authorization URL this flow opened

    async def callback(request: Request) -> HTMLResponse:
        params = request.query_params
        if not expected or params.get("state") != expected[0]:
            # Any page in the browser can call this port: only the answer to our own request counts.
            return HTMLResponse("<h1>agentify: unexpected callback (wrong state)</h1>", status_code=400)
        code = "" if "error" in params else params.get("code", "")
        with suppress(anyio.WouldBlock):  # only the first answer counts; later ones never block the server
            send.send_nowait(AuthorizationCodeResult(code=code, state=params.get("state")))
        if not code:
            refused = html.escape(params.get("error", "no code"))
            return HTMLResponse(f"<h1>agentify: authorization refused ({refused})</h1>", status_code=400)
        return HTMLResponse(_DONE)

    async def open_url(url: str) -> None:
        expected[:] = parse_qs(urlsplit(url).query).get("state", [])[:1]
        print(f"Open this page to authorize agentify for backend {spec.id!r}:\n{url}", file=sys.stderr, flush=True)
        await anyio.to_thread.run_sync(_try_browser, url)

    async def wait_for_code() -> AuthorizationCodeResult:
        with anyio.fail_after(BROWSER_WAIT_SECONDS):
            result = await receive.receive()
        if not result.code:
            raise LoginFailed("the authorization server refused the request (see the browser page)")
        return result

    app = Starlette(routes=[Route("/callback", callback)])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=urlsplit(redirect_uri).port or 0, log_level="warning")
    )
    provider = provider_for(spec, store, redirect_uri=redirect_uri, open_url=open_url, callback=wait_for_code)
    connection = RemoteConnection(spec)
    assert spec.url is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            async with (
                connection.client(provider) as http,
                streamable_http_client(spec.url, http_client=http) as (read, write),
                ClientSession(read, write, client_info=types.Implementation(name="agentify", version=__version__)) as s,
            ):
                await s.initialize()
                tools = await s.send_request(types.ListToolsRequest(), types.ListToolsResult)
        except TimeoutError:
            raise LoginFailed(f"no answer from the browser within {BROWSER_WAIT_SECONDS:g} s; run it again") from None
        finally:
            server.should_exit = True
    return len(tools.tools)


def _try_browser(url: str) -> None:
    try:
        webbrowser.open(url)
    except webbrowser.Error:
        pass  # the URL is on stderr: open it by hand
