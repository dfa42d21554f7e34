"""`agentify auth BACKEND`: the OAuth browser flow with a loopback redirect, driven by the SDK's provider.

The authorization URL is printed on stderr (and opened with `webbrowser` when possible); the
authorization server redirects the browser to http://127.0.0.1:PORT/callback, answered here by
a one-route HTTP/1.1 responder on anyio (one request per connection, its head bounded in size
and time). The SDK's provider then exchanges the code (PKCE) and stores the tokens through
`TokenFile`. Finally one MCP session proves they work.

The callback's socket is bound before anything else, on the port the client was registered with
last time; when that port is busy another is taken, said so, and the client is registered again
for it (a registration names its redirect exactly).
"""

from __future__ import annotations

import errno
import html
import socket
import webbrowser
from collections.abc import Awaitable, Callable
from contextlib import suppress
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

from agentify import __version__
from agentify.backends.oauth import SecretSink, TokenFile, preregister, provider_for
from agentify.backends.remote import RemoteConnection
from agentify.config import BackendConfig

BROWSER_WAIT_SECONDS = 300.0  # how long the user has to finish in the browser
HEAD_BYTES = 16 * 1024
HEAD_SECONDS = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found"}
_DONE = "<html><body><h1>agentify: authorized</h1><p>You can close this window.</p></body></html>"


class LoginFailed(Exception):
    """The flow could not be completed; the message says why and what to do."""


class _RegisteredFor(TokenFile):
    """The token file, but a client registration made for another redirect counts as none, so the SDK
    (or `preregister`, for a configured clientId) registers the client again for this one; and tokens
    that lack a scope the server asked for while serving count as none, so the server's 401 starts a
    new authorization (for that scope too, `oauth._Provider`) instead of the old tokens being proven."""

    def __init__(self, spec: BackendConfig, redirect_uri: str, secrets: SecretSink) -> None:
        super().__init__(spec, secrets=secrets)
        self._redirect = redirect_uri

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return registered_for(await super().get_client_info(), self._redirect)

    async def get_tokens(self) -> OAuthToken | None:
        return None if self.missing_scope() else await super().get_tokens()


def registered_for(info: OAuthClientInformationFull | None, redirect_uri: str) -> OAuthClientInformationFull | None:
    """A stored client registration, if it was made for `redirect_uri` (a registration names its redirect
    exactly); None otherwise, so the client registers again."""
    if info is None or redirect_uri not in [str(uri) for uri in info.redirect_uris or []]:
        return None
    return info


async def authorize_session(
    spec: BackendConfig,
    store: TokenFile,
    redirect_uri: str,
    open_url: Callable[[str], Awaitable[None]],
    wait_for_code: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> int:
    """The authorization itself, as the SDK's provider drives it (discovery, the issuer check, CIMD or dynamic
    registration, PKCE, RFC 8707 `resource`), proven by one MCP session; returns how many tools it lists.
    `open_url` sends the person to the authorization URL, `wait_for_code` brings back the redirect's answer
    (`agentify auth`: a browser and a loopback port; a team gateway: the person's IDE and `/oauth/callback`).

    Raises:
        what the SDK's provider, the transport or the callables raise.
    """
    await preregister(spec, store, redirect_uri)
    provider = provider_for(spec, store, redirect_uri=redirect_uri, open_url=open_url, callback=wait_for_code)
    connection = RemoteConnection(spec)
    assert spec.url is not None
    async with (
        connection.client(provider) as http,
        streamable_http_client(spec.url, http_client=http) as (read, write),
        ClientSession(read, write, client_info=types.Implementation(name="agentify", version=__version__)) as session,
    ):
        await session.initialize()
        tools = await session.send_request(types.ListToolsRequest(), types.ListToolsResult)
    return len(tools.tools)


def _callback_socket(remembered: int | None, tell: Callable[[str], None]) -> socket.socket:
    """A listening socket on 127.0.0.1: the remembered port when it is free, else any free one.

    Raises:
        LoginFailed: no port can be bound at all.
    """
    for port in ([remembered] if remembered else []) + [0]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past connections' TIME_WAIT is not "busy"
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
            tell(
                f"agentify auth: port {remembered}, where the last authorization came back, is busy; using port "
                f"{taken} instead (the client is registered again for it)"
            )
        return sock
    raise AssertionError("unreachable: port 0 either binds or raises")


async def login(spec: BackendConfig, secrets: SecretSink, tell: Callable[[str], None]) -> int:
    """Runs the flow for one OAuth backend; returns how many tools it lists with the new tokens. `secrets` hears
    the tokens and client secret as they become known, so the command's output never shows them; `tell`
    says what the person at the terminal should know meanwhile.

    Raises:
        LoginFailed.
    """
    stored = TokenFile(spec, secrets=secrets)
    previous = stored.redirect_uri()
    if missing := stored.missing_scope():
        tell(
            f"agentify auth: backend {spec.id!r} asked for more scope than was granted "
            f"({' '.join(sorted(missing))}): authorizing again"
        )
    with _callback_socket(urlsplit(previous).port if previous else None, tell) as listener:
        return await _authorize(spec, listener, secrets, tell)


async def _authorize(
    spec: BackendConfig, listener: socket.socket, secrets: SecretSink, tell: Callable[[str], None]
) -> int:
    redirect_uri = f"http://127.0.0.1:{listener.getsockname()[1]}/callback"
    store = _RegisteredFor(spec, redirect_uri, secrets)
    send, receive = anyio.create_memory_object_stream[AuthorizationCodeResult](1)
    expected: list[str] = []  # the `state` of the authorization URL this flow opened

    def callback(params: dict[str, str]) -> tuple[int, str]:
        if not expected or params.get("state") != expected[0]:
            # Any page in the browser can call this port: only the answer to our own request counts.
            return 400, "<h1>agentify: unexpected callback (wrong state)</h1>"
        code = "" if "error" in params else params.get("code", "")
        with suppress(anyio.WouldBlock):  # only the first answer counts; later ones never block the server
            send.send_nowait(AuthorizationCodeResult(code=code, state=params.get("state")))
        if not code:
            refused = html.escape(params.get("error", "no code"))
            return 400, f"<h1>agentify: authorization refused ({refused})</h1>"
        return 200, _DONE

    async def open_url(url: str) -> None:
        expected[:] = parse_qs(urlsplit(url).query).get("state", [])[:1]
        tell(f"Open this page to authorize agentify for backend {spec.id!r}:\n{url}")
        await anyio.to_thread.run_sync(_try_browser, url)

    async def wait_for_code() -> AuthorizationCodeResult:
        with anyio.fail_after(BROWSER_WAIT_SECONDS):
            result = await receive.receive()
        if not result.code:
            raise LoginFailed("the authorization server refused the request (see the browser page)")
        return result

    async with anyio.create_task_group() as tg:
        tg.start_soon(_serve_callbacks, listener, callback)
        try:
            tools = await authorize_session(spec, store, redirect_uri, open_url, wait_for_code)
        except TimeoutError:
            raise LoginFailed(f"no answer from the browser within {BROWSER_WAIT_SECONDS:g} s; run it again") from None
        finally:
            tg.cancel_scope.cancel()
    return tools


async def _serve_callbacks(listener: socket.socket, answer: Callable[[dict[str, str]], tuple[int, str]]) -> None:
    """Answers `GET /callback?...` with `answer(query)`, and anything else with 404, until cancelled."""

    async def respond(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            head = b""
            with anyio.move_on_after(HEAD_SECONDS):
                while b"\r\n\r\n" not in head and len(head) <= HEAD_BYTES:
                    try:
                        head += await stream.receive(4096)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            target = urlsplit(rest.rpartition(" ")[0])
            status, page = (404, "<h1>agentify: not found</h1>")
            if method == "GET" and target.path == "/callback":
                status, page = answer({k: v[0] for k, v in parse_qs(target.query).items()})
            body = page.encode()
            head_out = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(head_out.encode() + body)

    server = await anyio.abc.SocketListener.from_socket(listener)
    async with server:
        await server.serve(respond)


def _try_browser(url: str) -> None:
    try:
        webbrowser.open(url)
    except webbrowser.Error:
        pass  # the URL is on stderr: open it by hand
