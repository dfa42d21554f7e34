"""Who may talk to the console: one ASGI middleware in front of every HTTP and WebSocket request.

Checks, in order:
1. Host. A page on evil.example whose name is re-pointed at 127.0.0.1 (DNS rebinding) still
   sends `Host: evil.example`; only the console's own names pass (400 otherwise).
2. Origin. Browsers let any page open a WebSocket to 127.0.0.1, without a preflight; a request
   that names a foreign Origin is refused (403). Clients that send no Origin are not browsers.
3. The token: `?token=`, `Authorization: Bearer`, or the cookie set (HttpOnly, SameSite=Strict)
   when the page was opened with `?token=`. Missing: 401; wrong: 403.
Every HTTP response also gets headers that keep the page out of frames, caches and referrers.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass
from functools import cached_property
from http.cookies import SimpleCookie
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
_WILDCARDS = ("0.0.0.0", "::", "")


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

    @property
    def cookie_name(self) -> str:
        return f"agentify_console_{self.port}"  # cookies ignore ports: two gateways must not share one

    @cached_property
    def _own_hosts(self) -> frozenset[str]:
        names = {"127.0.0.1", "localhost", "[::1]", _bracketed(self.host)}
        return frozenset(f"{name}:{self.port}".lower() for name in names)

    def host_allowed(self, host: str | None) -> bool:
        """127.0.0.1, localhost, [::1] and the bound host, with the port; on a wildcard bind also
        this machine's name and any IP address (rebinding needs a DNS name of the attacker's)."""
        if not host:
            return False
        host = host.lower()
        if host in self._own_hosts:
            return True
        name, _, port = host.rpartition(":")
        if self.host not in _WILDCARDS or port != str(self.port):
            return False
        if name in (socket.gethostname().lower(), socket.getfqdn().lower()):
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

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
        presented, from_query = _presented_token(connection, self.access.cookie_name)
        if not self.access.host_allowed(connection.headers.get("host")):
            await _deny(scope, receive, send, 400, "unexpected Host header: open the console as 127.0.0.1 or localhost")
        elif origin is not None and not self.access.origin_allowed(origin):
            await _deny(scope, receive, send, 403, f"requests from the origin {origin} are not allowed")
        elif presented is None:
            await _deny(scope, receive, send, 401, "the console token is missing: open the URL from agentify's stderr")
        elif not self.access.token_matches(presented):
            await _deny(scope, receive, send, 403, "wrong console token: open the URL from agentify's latest start")
        else:
            cookie = self._cookie() if from_query and scope["type"] == "http" else None
            await self.app(scope, receive, _with_headers(scope, send, cookie))

    def _cookie(self) -> str:
        cookie: SimpleCookie = SimpleCookie()
        cookie[self.access.cookie_name] = self.access.token
        morsel = cookie[self.access.cookie_name]
        morsel["httponly"] = True
        morsel["samesite"] = "Strict"
        morsel["path"] = "/"
        return morsel.OutputString()


def _presented_token(connection: HTTPConnection, cookie_name: str) -> tuple[str | None, bool]:
    """The token the client sent, and whether it came in the query (then the cookie is set)."""
    query = connection.query_params.get("token")
    if query is not None:
        return query, True
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    return connection.cookies.get(cookie_name), False


def _with_headers(scope: Scope, send: Send, cookie: str | None) -> Send:
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
            if cookie is not None:
                headers.append("set-cookie", cookie)
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
