"""The gateway's own `/oauth/start/<id>` and `/oauth/callback` (OAuth backends authorized by URL), as a small
ASGI wrapper in front of everything that needs a bearer token: the person's browser carries none. What the
routes decide is `team.flows`'; this module only speaks HTTP: a short HTML page (escaped), a redirect, and
the cookie that binds the browser that started a flow to its callback.

A flow that asks for a person's own secrets (a stdio backend's `${person:NAME}`) answers its start URL with a
form of password fields instead of a redirect, posted back to the same URL (`team/secret_pages.py`).

The routes are matched by their last segments, so a proxy that serves the gateway under a prefix
(`publicUrl` `https://h/team/mcp` gives `https://h/team/oauth/...`) needs no extra configuration.
"""

from __future__ import annotations

import html
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from agentify.team.flows import Page
from agentify.team.identity import Authorizations
from agentify.team.secret_pages import submit_secrets

COOKIE = "agentify_oauth"
_START = "/oauth/start/"
_CALLBACK = "/oauth/callback"
_MAX_QUERY = 8192
_MAX_FORM = 65536  # the body of a posted page of secrets


class OAuthRoutes:
    def __init__(self, app: Any, identity: Authorizations) -> None:
        self._app = app
        self._identity = identity

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        start = path.rpartition(_START)[2] if _START in path else None
        if scope["type"] != "http" or (start is None and not path.endswith(_CALLBACK)):
            await self._app(scope, receive, send)
            return
        flows = self._identity.flows
        secure = (self._identity.base_url or "").startswith("https:")
        if start is not None and scope["method"] == "POST":
            await _answer(send, await self._posted(start, scope, receive), secure=secure)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, Page(405, "Only GET is answered here."))
            return
        if start is not None:
            page = await flows.start(start) if start and "/" not in start else Page(404, "Unknown link.")
        else:
            raw = scope.get("query_string", b"")[:_MAX_QUERY].decode("latin-1")
            params = {k: v[0] for k, v in parse_qs(raw).items()}
            page = await flows.callback(params, _cookie(scope))
        await _answer(send, page, secure=secure)

    async def _posted(self, flow_id: str, scope: Any, receive: Any) -> Page:
        """A page of secrets posted back (form-encoded, at most `_MAX_FORM` bytes)."""
        if not flow_id or "/" in flow_id:
            return Page(404, "Unknown link.")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_FORM:
                return Page(413, "That is more than a page of secrets can hold.")
            if not message.get("more_body"):
                break
        try:
            values = {k: v[0] for k, v in parse_qs(body.decode(), strict_parsing=False).items()}
        except UnicodeDecodeError:
            return Page(400, "The form could not be read.")
        vault = getattr(self._identity, "vault", None)  # only a gateway with the vault asks for secrets
        if vault is None:
            return Page(404, "Unknown link.")
        return await submit_secrets(self._identity.flows, vault, flow_id, _cookie(scope), values)


def _cookie(scope: Any) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except ValueError:  # a malformed cookie header counts as none
                continue
            if COOKIE in jar:
                return jar[COOKIE].value
    return None


async def _answer(send: Any, page: Page, *, secure: bool = False) -> None:
    form = ""
    if page.asks:
        fields = "".join(
            f'<p><label>{html.escape(name)} <input type="password" name="{html.escape(name)}" autocomplete="off" '
            "required></label></p>"
            for name in page.asks
        )
        form = f'<form method="post">{fields}<p><button type="submit">Keep</button></p></form>'
    body = (
        "<!doctype html><html><head><meta charset=utf-8><title>agentify</title></head>"
        f"<body><h1>agentify</h1><p>{html.escape(page.text)}</p>{form}</body></html>"
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
        (b"content-security-policy", b"default-src 'none'; form-action 'self'; frame-ancestors 'none'"),
    ]
    if page.location is not None:
        headers.append((b"location", page.location.encode()))
    if page.cookie is not None:
        flags = "; Path=/; HttpOnly; SameSite=Lax; Max-Age=600" + ("; Secure" if secure else "")
        headers.append((b"set-cookie", f"{COOKIE}={page.cookie}{flags}".encode()))
    await send({"type": "http.response.start", "status": page.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
