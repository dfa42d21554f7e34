"""Who may talk to the console: one ASGI middleware in front of every HTTP and WebSocket request.

Checks, in order:
1. Host. A page on evil.example whose name is re-pointed at 127.0.0.1 (DNS rebinding) still
   sends `Host: evil.example`; only the console's own names pass (400 otherwise): the loopback
   names, and off loopback the configured host (on a wildcard bind, this machine's name).
2. Origin. Browsers let any page open a WebSocket to 127.0.0.1, without a preflight; a request
   that names a foreign Origin is refused (403). Clients that send no Origin are not browsers.
3. The token, except for the page shell (`/`, `/ui/…`) and the API description (`/openapi.json`,
   `/docs`), which are the same for every install and carry no data. It comes as
   `Authorization: Bearer <token>`, or, from a browser's WebSocket (which cannot send headers),
   as the subprotocol `agentify-token.<base64url of the token>` next to `agentify-console`.
   Missing: 401; wrong: 403. There is no cookie: cookies ignore ports, so every other web server
   on 127.0.0.1 would receive it. The page keeps the token in its tab's sessionStorage.
Every HTTP response also gets headers that keep the page out of frames, caches and referrers.
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
import socket
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import quote

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

_SAFETY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
# The page loads nothing from elsewhere; FastAPI's /docs pages use a CDN, so they go without it.
_PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_DOCS_PATHS = ("/docs", "/redoc")
_PUBLIC_PATHS = ("/", "/openapi.json", "/docs", "/docs/oauth2-redirect")
_PUBLIC_PREFIXES = ("/ui/",)
_WILDCARDS = ("0.0.0.0", "::", "")
SUBPROTOCOL = "agentify-console"
TOKEN_SUBPROTOCOL_PREFIX = "agentify-token."


@dataclass(frozen=True)
class Access:
    token: str
    host: str  # as bound
    port: int

    @property
    def base_url(self) -> str:
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://{_bracketed(host)}:{self.port}/"

    @property
    def url_with_token(self) -> str:
        return f"{self.base_url}?token={quote(self.token, safe='')}"

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the console."""
        try:
            return self.host == "localhost" or ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    @cached_property
    def _own_hosts(self) -> frozenset[str]:
        """127.0.0.1, localhost and [::1], and the configured host; on a wildcard bind, instead of
        that, this machine's own name. Any other name or address, even with the right port, is
        someone else's: the attacker's name in DNS rebinding, or an address nobody configured."""
        names = {"127.0.0.1", "localhost", "[::1]"}
        if self.host in _WILDCARDS:
            names |= {socket.gethostname(), socket.getfqdn()}
        else:
            names.add(_bracketed(self.host))
        return frozenset(f"{name}:{self.port}".lower() for name in names if name)

    def host_allowed(self, host: str | None) -> bool:
        return bool(host) and str(host).lower() in self._own_hosts

    def origin_allowed(self, origin: str) -> bool:
        scheme, _, host = origin.partition("://")
        return scheme.lower() == "http" and self.host_allowed(host)

    def token_matches(self, presented: str) -> bool:
        return secrets.compare_digest(presented.encode(), self.token.encode())


class ConsoleGuard:
    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        origin = connection.headers.get("origin")
        public = scope["type"] == "http" and _is_public(scope["path"])
        presented = None if public else presented_token(connection)
        if not self.access.host_allowed(connection.headers.get("host")):
            detail = "unexpected Host header: open the console by the address in agentify's start-up line"
            await _deny(scope, receive, send, 400, detail)
        elif origin is not None and not self.access.origin_allowed(origin):
            await _deny(scope, receive, send, 403, f"requests from the origin {origin} are not allowed")
        elif public and (scope["method"] not in ("GET", "HEAD") or _has_body(scope)):
            # Public pages hold no data and take none: a body here would be read with no token shown.
            await _deny(scope, receive, send, 400, "the console's public pages take GET without a body only")
        elif public:
            await self.app(scope, receive, _with_headers(scope, send))
        elif presented is None:
            await _deny(scope, receive, send, 401, "the console token is missing: open the URL from agentify's stderr")
        elif not self.access.token_matches(presented):
            await _deny(scope, receive, send, 403, "wrong console token: open the URL from agentify's latest start")
        else:
            await self.app(scope, receive, _with_headers(scope, send))


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


def _is_public(path: str) -> bool:
    return path in _PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)


def presented_token(connection: HTTPConnection) -> str | None:
    """The token from `Authorization: Bearer`, or from a WebSocket's `agentify-token.` subprotocol."""
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    for offered in connection.scope.get("subprotocols", []) if connection.scope["type"] == "websocket" else []:
        if offered.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return _decoded(offered.removeprefix(TOKEN_SUBPROTOCOL_PREFIX))
    return None


def token_subprotocol(token: str) -> str:
    """What the page offers as a WebSocket subprotocol: header-safe whatever the token's characters."""
    return TOKEN_SUBPROTOCOL_PREFIX + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _decoded(encoded: str) -> str:
    """The token inside a subprotocol; an undecodable one is a wrong token (403), never a crash."""
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except ValueError:  # binascii.Error, UnicodeDecodeError, and non-ASCII input
        return "\0undecodable"


def _with_headers(scope: Scope, send: Send) -> Send:
    if scope["type"] != "http":
        return send
    page = not scope["path"].startswith(_DOCS_PATHS)

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in _SAFETY_HEADERS.items():
                headers.setdefault(name, value)
            if page:
                headers.setdefault("content-security-policy", _PAGE_POLICY)
        await send(message)

    return sending


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    headers = dict(_SAFETY_HEADERS) | ({"www-authenticate": "Bearer"} if status == 401 else {})
    response = JSONResponse({"detail": detail}, status_code=status, headers=headers)
    if scope["type"] == "http":
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=1008, reason=detail[:120])


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
