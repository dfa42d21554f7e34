"""What every bearer-token check of `agentify serve --transport http` shares (the check itself is
`mcp_server.bearer.RequireBearer`, over the verifier `server.auth` names).

Over HTTP anyone who can reach the port is a client, unlike stdio, where the client is the
process that started agentify. So every request needs `Authorization: Bearer <token>`; with the
shared token (`server.auth` type `token`) it comes from `AGENTIFY_HTTP_TOKEN` (at least
`MIN_TOKEN_CHARS` off loopback) or is generated per start and logged on stderr (`choose_token`).

Guessing is slowed per client address (`Backoff`): after `FREE_FAILURES` refusals within a minute,
a request from the address whose token does not verify is refused with 429 (`Retry-After`) instead of 401,
for a while that doubles with each further failure, up to `MAX_BACKOFF_SECONDS`; a token that verifies is
never refused by it (many people may share one address: a NAT, a VPN, a proxy). Every answer is immediate, so a
client without the token never holds a connection. Addresses are what the socket says, except from
the proxies of `server.trustedProxies`, whose `X-Forwarded-For` names the client (uvicorn's proxy
headers, set up by `serve`); clients behind one untrusted proxy or NAT share theirs.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import time
from typing import Any

Scope = dict[str, Any]
ASGIApp = Any
MIN_TOKEN_CHARS = 16
FREE_FAILURES = 5
FAILURE_WINDOW_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 60.0
_MAX_ADDRESSES = 10_000


class BadToken(Exception):
    """The configured token or `--no-auth` cannot be used with this bind; the message says why."""


NO_AUTH_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The binds `--no-auth` accepts: exactly the names the SDK guards against DNS rebinding (it checks the
Host and Origin of every request for these only), so a web page cannot reach the gateway either."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def choose_token(host: str, configured: str | None, no_auth: bool) -> str | None:
    """The token HTTP clients must send, or None for `--no-auth` on a loopback bind.

    Raises:
        BadToken: `--no-auth` with a bind beyond loopback, or with a token set; a token shorter than
            MIN_TOKEN_CHARS beyond loopback.
    """
    if no_auth:
        if configured:
            raise BadToken("--no-auth and AGENTIFY_HTTP_TOKEN contradict each other: drop one of them")
        if host not in NO_AUTH_HOSTS:
            raise BadToken(
                f"--no-auth is refused with --host {host}: only {', '.join(NO_AUTH_HOSTS)} are guarded against "
                "other machines and web pages. Bind 127.0.0.1, or drop --no-auth and give clients the token "
                "(AGENTIFY_HTTP_TOKEN)"
            )
        return None
    if configured and len(configured) < MIN_TOKEN_CHARS and not is_loopback(host):
        raise BadToken(
            f"AGENTIFY_HTTP_TOKEN is {len(configured)} characters long; serving beyond loopback (--host {host}) "
            f"needs at least {MIN_TOKEN_CHARS}. Use a random one: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(24))'"
        )
    return configured or secrets.token_urlsafe(24)


class Backoff:
    """Recent refusals per client address, and until when an address is refused outright."""

    def __init__(self) -> None:
        self._failures: dict[str, tuple[int, float, float]] = {}  # address -> (count, last failure, refused until)

    def retry_after(self, address: str) -> float:
        """Seconds this address must wait before it may try again (0: it may try now)."""
        entry = self._failures.get(address)
        return max(0.0, entry[2] - time.monotonic()) if entry else 0.0

    def failed(self, address: str) -> None:
        now = time.monotonic()
        count, last, _ = self._failures.pop(address, (0, now, now))
        count = 1 if now - last > FAILURE_WINDOW_SECONDS else count + 1
        extra = count - FREE_FAILURES + 1  # the FREE_FAILURES-th refusal starts the back-off
        until = now + min(2.0 ** (extra - 1), MAX_BACKOFF_SECONDS) if extra > 0 else now
        self._failures[address] = (count, now, until)  # re-inserted: the dict is oldest first
        while len(self._failures) > _MAX_ADDRESSES:
            del self._failures[next(iter(self._failures))]

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)


class NoWebSockets:
    """ASGI middleware: MCP over HTTP has no WebSocket; an upgrade is closed before it is accepted, which
    uvicorn answers with 403 (instead of a 500 and a traceback from an app that only speaks HTTP)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "MCP over HTTP uses no WebSocket"})
            return
        await self._app(scope, receive, send)


async def refuse(
    send: Any, status: int, error: str, message: str, *, challenge: str, retry_after: float | None = None
) -> None:
    """An HTTP refusal: a JSON body that says what to do, and the `WWW-Authenticate` challenge."""
    body = json.dumps({"error": error, "error_description": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"www-authenticate", challenge.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", str(max(1, round(retry_after))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
