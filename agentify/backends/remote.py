"""Remote connections: streamable HTTP and SSE through the SDK's own clients, with headers, bearer and OAuth.

Without a configured transport, streamable HTTP is tried first; a server that refuses its
`initialize` POST with 400, 404 or 405 is tried again over the old SSE transport, as the MCP
spec's backwards-compatibility section describes. A URL whose path ends in `/sse` means SSE.

The link is "gone" when the server's stream ends (SSE) or the transport fails (streamable
HTTP: the SDK's transport raises, which ends the session). Over SSE a refused POST (401, 403,
...) ends the link too: the SDK's writer stops at the first one while the event stream stays
open, so every request after it would wait for its timeout. Header values and tokens never
appear in what this module logs or reports (the URL is shown masked).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from agentify._common.background import background
from agentify._common.errors import first, first_where
from agentify.backends.bounded_http import AnswerBounds, AnswerRefused
from agentify.backends.connection import Link
from agentify.backends.failures import AuthRequired, SessionFailure, Unexpected, Unreachable
from agentify.backends.oauth import SecretSink, TokenFile, provider_for
from agentify.config import BackendConfig, BearerSettings
from agentify.security.credentials import mask_url

CONNECT_SECONDS = 10.0  # connect, write and pool timeouts of the HTTP client
STREAM_READ_SECONDS = 300.0  # a server may hold a response stream open this long without sending


class RemoteConnection:
    def __init__(
        self,
        spec: BackendConfig,
        secrets: SecretSink | None = None,
        tokens: TokenFile | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        """`tokens`: where the OAuth tokens are (one principal's, in the vault); default: `agentify auth`'s file.
        `auth`: how requests authenticate instead (a principal's exchanged token)."""
        assert spec.url is not None
        self._spec = spec
        self.url = spec.url
        path = urlsplit(spec.url).path.rstrip("/")
        self.kind: str = spec.transport or ("sse" if path.endswith("/sse") else "streamable-http")
        self.may_fall_back = spec.transport is None and self.kind == "streamable-http"
        self._tokens = tokens or (TokenFile(spec, secrets=secrets) if spec.oauth else None)
        self._fixed_auth = auth

    def headers(self) -> dict[str, str]:
        headers = dict(self._spec.headers)
        if isinstance(self._spec.auth, BearerSettings):
            headers["Authorization"] = f"Bearer {self._spec.auth.token}"
        return headers

    def client(
        self, auth: httpx2.Auth | None, on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None
    ) -> httpx2.AsyncClient:
        """An HTTP client with the backend's headers and bearer token, and `auth` (OAuth) if given; what is
        not the MCP endpoint's own answer is bounded (`bounded_http`)."""
        hooks = AnswerBounds(self.url).hooks()
        if on_response is not None:
            hooks["response"].append(on_response)
        return httpx2.AsyncClient(
            headers=self.headers(),
            auth=auth,
            timeout=httpx2.Timeout(CONNECT_SECONDS, read=STREAM_READ_SECONDS),
            event_hooks=hooks,
        )

    def _auth(self) -> httpx2.Auth | None:
        """The SDK's OAuth provider once there are stored tokens; before that a 401 means `needs_auth`."""
        if self._fixed_auth is not None:
            return self._fixed_auth
        if self._tokens is None or not self._tokens.has_tokens():
            return None
        return provider_for(self._spec, self._tokens)

    def retry_auth(self) -> bool:
        return self._tokens is not None and self._tokens.expire()

    def auth_stamp(self) -> float:
        if self._fixed_auth is not None:
            return float(getattr(self._fixed_auth, "stamp", lambda: 0.0)())
        return self._tokens.stamp() if self._tokens is not None else 0.0

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Link]:
        links: list[_Relay] = []  # the open link, once there is one: the status hook writes to it

        async def on_response(response: httpx2.Response) -> None:
            if not links:
                return
            link, status, post = links[0].link, response.status_code, response.request.method == "POST"
            if status >= 400:
                link.refused_status = status
                if post and self.kind == "sse":
                    links[0].cut(f"the server refused a message with HTTP {status}")
            elif post and str(response.request.url) == self.url:
                link.refused_status = None  # an MCP request went through: earlier refusals are over

        def client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return self.client(self._auth(), on_response)

        try:
            if self.kind == "sse":
                async with sse_client(self.url, httpx_client_factory=client, timeout=CONNECT_SECONDS) as (read, write):
                    async with _relayed(read, write) as relay:
                        links.append(relay)
                        yield relay.link
            else:
                async with client() as http, streamable_http_client(self.url, http_client=http) as (read, write):
                    async with _relayed(read, write) as relay:
                        links.append(relay)
                        yield relay.link
        except httpx2.HTTPStatusError as exc:
            if exc.response.status_code == 401:
                raise AuthRequired from exc
            raise

    def fall_back(self) -> bool:
        """After the server refused streamable HTTP's `initialize`: use SSE from now on, if allowed."""
        if not self.may_fall_back:
            return False
        self.kind = "sse"
        self.may_fall_back = False
        return True

    def failure(self, exc: BaseException) -> SessionFailure:
        where = mask_url(self.url)
        found = first_where(exc, lambda e: isinstance(_known(e), _EXPLAINED))
        error = _known(found) if found is not None else None
        if isinstance(error, httpx2.ConnectError):
            return Unreachable(f"cannot connect to {where} (is the server running?)")
        if isinstance(error, httpx2.HTTPStatusError):
            return Unreachable(f"{where} answered HTTP {error.response.status_code}")
        if isinstance(error, httpx2.TimeoutException):
            return Unreachable(f"{where} did not answer in time")
        if isinstance(error, OAuthFlowError) and "Protected resource" in str(error) and "does not match" in str(error):
            return Unreachable(
                f"the protected-resource metadata of {where} names another resource ({str(error)[:300]}): "
                "authorizing cannot fix this; the backend's url in the config, or the server's metadata, is wrong"
            )
        if isinstance(error, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
            return Unreachable(
                f"the OAuth flow with {where} failed ({type(error).__name__}); run `agentify auth {self._spec.id}`"
            )
        if isinstance(error, AnswerRefused):
            return Unreachable(f"the OAuth flow with {where} failed: {error}")
        if isinstance(error, httpx2.TransportError):
            return Unreachable(f"the connection to {where} failed ({type(error).__name__})")
        leaf = first(exc, BaseException) or exc
        return Unexpected(f"unexpected failure talking to {where}: {type(leaf).__name__}")


_EXPLAINED = (httpx2.HTTPStatusError, httpx2.TransportError, OAuthFlowError, OAuthTokenError, OAuthRegistrationError)


def _known(error: BaseException) -> BaseException | None:
    """`error` or its cause, whichever is one of the errors `failure` names (the SDK wraps some)."""
    return next((e for e in (error, error.__cause__) if isinstance(e, _EXPLAINED)), None)


@dataclass
class _Relay:
    link: Link
    scope: anyio.CancelScope

    def cut(self, reason: str) -> None:
        """Ends the link now: the session's read side closes, so whatever waits on an answer fails at once."""
        self.link.lost_reason = self.link.lost_reason or reason
        self.scope.cancel()
        self.link.gone.set()


@asynccontextmanager
async def _relayed(read: Any, write: Any) -> AsyncIterator[_Relay]:
    """A link over the transport's streams whose read side is forwarded, so it learns at once when it ends."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    link = Link(read_stream=receive, write_stream=write)
    relayed = _Relay(link, anyio.CancelScope())

    async def relay() -> None:
        with relayed.scope:
            try:
                async with send:
                    async for message in read:
                        if isinstance(message, Exception):
                            link.lost_reason = f"the stream failed: {type(message).__name__}"
                        await send.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            # The stream ended by itself (a cancelled relay leaves the verdict to the supervisor).
            link.lost_reason = link.lost_reason or "the server closed the connection"
            link.gone.set()

    async with background() as tg:
        tg.start_soon(relay)
        yield relayed
