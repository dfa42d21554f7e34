"""Bearer-token authentication for `agentify serve --transport http`.

Over HTTP anyone who can reach the port is a client, unlike stdio, where the client is the
process that started agentify. So every request needs `Authorization: Bearer <token>`; the
token comes from `AGENTIFY_HTTP_TOKEN` or is generated per start and logged on stderr.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from typing import Any

from agentify.errors import ConfigError

Scope = dict[str, Any]
ASGIApp = Any


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
        ConfigError: `--no-auth` with a bind beyond loopback, or `--no-auth` with a token set.
    """
    if no_auth:
        if configured:
            raise ConfigError("--no-auth and AGENTIFY_HTTP_TOKEN contradict each other: drop one of them")
        if host not in NO_AUTH_HOSTS:
            raise ConfigError(
                f"--no-auth is refused with --host {host}: only {', '.join(NO_AUTH_HOSTS)} are guarded against "
                "other machines and web pages. Bind 127.0.0.1, or drop --no-auth and give clients the token "
                "(AGENTIFY_HTTP_TOKEN)"
            )
        return None
    return configured or secrets.token_urlsafe(24)


class BearerAuth:
    """ASGI middleware: HTTP requests without the right bearer token get 401; lifespan passes through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorised(scope):
            await _unauthorised(send)
            return
        await self._app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        presented = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
        return secrets.compare_digest(presented, self._expected)


async def _unauthorised(send: Any) -> None:
    body = json.dumps(
        {
            "error": "unauthorized",
            "message": "agentify needs 'Authorization: Bearer <token>': use AGENTIFY_HTTP_TOKEN, "
            "or the token agentify logged when it started",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="agentify"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
