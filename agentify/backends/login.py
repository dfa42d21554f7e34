"""`agentify auth BACKEND`: the OAuth browser flow with a loopback redirect, driven by the SDK's provider.

The authorization URL is printed on stderr (and opened with `webbrowser` when possible); the
authorization server redirects the browser to http://127.0.0.1:PORT/callback, served here by a
one-route Starlette app under uvicorn. The SDK's provider then exchanges the code (PKCE) and
stores the tokens through `TokenFile`. Finally one MCP session proves they work.

The callback's socket is bound before anything else, on the port the client was registered with
last time; when that port is busy another is taken, said so, and the client is registered again
for it (a registration names its redirect exactly).
"""

from __future__ import annotations

import errno
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
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull
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


class _RegisteredFor(TokenFile):
    """The token file, but a client registration made for another redirect counts as none, so the SDK
    (or `preregister`, for a configured clientId) registers the client again for this one."""

    def __init__(self, spec: BackendConfig, redirect_uri: str) -> None:
        super().__init__(spec)
        self._redirect = redirect_uri

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = await super().get_client_info()
        if info is None or self._redirect not in [str(uri) for uri in info.redirect_uris or []]:
            return None
        return info


def _callback_socket(remembered: int | None) -> socket.socket:
    """A listening socket on 127.0.0.1: the remembered port when it is free, else any free one.

    Raises:
        LoginFailed: no port can be bound at all.
    """
    for port in ([remembered] if remembered else []) + [0]:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            sock.close()
            if port and exc.errno == errno.EADDRINUSE:
                continue
            raise LoginFailed(f"cannot listen on 127.0.0.1 for the browser's redirect: {exc.strerror or exc}") from None
        sock.listen(16)
        taken = int(sock.getsockname()[1])
        if remembered and taken != remembered:
            print(
                f"agentify auth: port {remembered}, where the last authorization came back, is busy; using port "
                f"{taken} instead (the client is registered again for it)",
                file=sys.stderr,
                flush=True,
            )
        return sock
    raise AssertionError("unreachable: port 0 either binds or raises")


async def login(spec: BackendConfig) -> int:
    """Runs the flow for one OAuth backend; returns how many tools it lists with the new tokens.

    Raises:
        LoginFailed.
    """
    previous = TokenFile(spec).redirect_uri()
    with _callback_socket(urlsplit(previous).port if previous else None) as listener:
        return await _authorize(spec, listener)


async def _authorize(spec: BackendConfig, listener: socket.socket) -> int:
    redirect_uri = f"http://127.0.0.1:{listener.getsockname()[1]}/callback"
    store = _RegisteredFor(spec, redirect_uri)
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
    # No logging config of its own (its records go to the redacting sink) and no lifespan to interrupt.
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off"))
    provider = provider_for(spec, store, redirect_uri=redirect_uri, open_url=open_url, callback=wait_for_code)
    connection = RemoteConnection(spec)
    assert spec.url is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [listener])
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
