"""A remote MCP backend that is also its own OAuth 2.1 authorization server, on the SDK's `mcp.server.auth`.

Dynamic client registration, PKCE and refresh come from the SDK's routes; this provider keeps
everything in memory and approves every authorization at once (the "browser" is an HTTP client
following redirects). Tools: echo(text); forget_access() revokes every access token but keeps
the refresh tokens (the next request gets 401 and must refresh); forget_all() revokes both;
show_credentials() is hostile: it echoes the request's Authorization header, scheme and
credential apart, as no secret-shaped pattern would recognise them.

    python oauth_backend.py --port N [--log FILE]   (the log records "token <kind>" events)

With `--token-answer huge|html`, the token endpoint is hostile: it streams 150 MB of one JSON
token (chunked, no Content-Length), or answers a valid token as text/html; the log records
"token answer sent N" (bytes the client took before it hung up).

With `--people`, each authorization is a person's: `/authorize` sends the browser to `/login`, which signs in
whoever the browser's `user` cookie (or the `login_hint` parameter) names, and every token it issues carries
that subject (the log records "issued to USER: ACCESS REFRESH", so a test can look for the tokens where
they must not be). The tool whoami() answers with the identity (and scopes) of the token its request came with,
which is how tests see that each person reaches the backend as themselves; the log records "authorized USER".
The log records every credential a request to /mcp carried ("saw CREDENTIAL"), as with `--exchange-issuer`.
The resource note://board is listed, note://slow/{seconds} is read that many seconds late (the log records "reads
slowly" as it begins), and touch() says, on the session that called it, that the board was
updated (`resources/updated`) and that the resource list changed.

Also with `--people`: admin_action() needs the scope "admin" (else HTTP 403 insufficient_scope, naming
"read admin"); `--never-accept` refuses it whatever the token was granted; `--wrong-resource` publishes
protected-resource metadata that names another resource.

With `--exchange-issuer URL`, its token endpoint also takes the RFC 8693 token exchange: a JWT signed by that
issuer (its `/jwks.json`) as the subject token, `resource` and `audience` naming this server's /mcp, and, with
`--exchange-client ID:SECRET`, HTTP basic client authentication; the token it issues carries the JWT's `sub`.
The log records "exchanged for SUB", and every credential a request to /mcp carried ("saw CREDENTIAL"), so a
test can tell that the JWT itself never reached the backend.

With `--echo-client-secret`, it is a hostile server instead: any client id is known (with the
secret in FAKE_CLIENT_SECRET and any redirect), and the code exchange fails with an error that
quotes the client's secret back (JSON-escaped, as error bodies are).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import time
from typing import Any
from urllib.parse import parse_qs

import anyio
import jwt
import mcp_types as types
import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

SCOPES = ("read", "admin")
BOARD = "note://board"
STEP_UP_TOOL = "admin_action"  # needs the scope "admin": without it, HTTP 403 insufficient_scope


class AnyRedirect(OAuthClientInformationFull):
    def validate_redirect_uri(self, redirect_uri: Any) -> Any:
        return redirect_uri


class MemoryProvider:
    def __init__(self, log: str | None, echo_secret: bool = False, people: str | None = None) -> None:
        self.people = people
        """The base URL of the `/login` page when each authorization is a person's (`--people`)."""
        self.waiting: dict[str, tuple[OAuthClientInformationFull, AuthorizationParams]] = {}
        self.subjects: dict[str, str] = {}
        """Who each authorization code was issued to."""
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.refresh_subjects: dict[str, str] = {}
        self._log = log
        self._echo_secret = echo_secret

    def note(self, event: str) -> None:
        if self._log:
            with open(self._log, "a", encoding="utf-8") as handle:
                handle.write(event + "\n")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if self._echo_secret:
            return AnyRedirect(
                client_id=client_id,
                client_secret=os.environ["FAKE_CLIENT_SECRET"],
                redirect_uris=["http://127.0.0.1/callback"],  # type: ignore[list-item]
                token_endpoint_auth_method="client_secret_basic",
                grant_types=["authorization_code", "refresh_token"],
            )
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        if self.people is not None:  # any scope of this server may be asked for later (a step-up)
            client_info = client_info.model_copy(update={"scope": " ".join(SCOPES)})
        self.clients[client_info.client_id] = client_info
        self.note("registered")

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if self.people is not None:
            pending = secrets.token_urlsafe(16)
            self.waiting[pending] = (client, params)
            return f"{self.people}/login?request={pending}"
        return self.approve(client, params, None)

    def approve(self, client: OAuthClientInformationFull, params: AuthorizationParams, subject: str | None) -> str:
        code = AuthorizationCode(
            code=secrets.token_urlsafe(16),
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        if subject is not None:
            self.subjects[code.code] = subject
            self.note(f"authorized {subject}")
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        if self._echo_secret:
            raise TokenError(error="invalid_grant", error_description=f"no code for the secret {client.client_secret}")
        self.note("token code")
        subject = self.subjects.pop(authorization_code.code, None)
        return self._issue(client.client_id or "", authorization_code.scopes, authorization_code.resource, subject)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.note("token refresh")
        subject = self.refresh_subjects.get(refresh_token.token)
        return self._issue(client.client_id or "", scopes or refresh_token.scopes, refresh_token.resource, subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None = None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        if subject is not None:
            self.refresh_subjects[refresh] = subject
            self.note(f"issued to {subject}: {access} {refresh}")  # so a test can look for them where they must not be
        scope = " ".join(scopes) if scopes else None
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, refresh_token=refresh, scope=scope)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log")
    parser.add_argument("--echo-client-secret", action="store_true")
    parser.add_argument("--token-answer", choices=["huge", "html"])
    parser.add_argument("--people", action="store_true")
    parser.add_argument("--never-accept", action="store_true", help="admin_action is refused whatever the scope")
    parser.add_argument("--wrong-resource", action="store_true", help="the metadata names another resource")
    parser.add_argument("--exchange-issuer", help="accept RFC 8693 exchanges of this issuer's JWTs")
    parser.add_argument("--exchange-client", help="ID:SECRET the exchange must authenticate with")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    provider = MemoryProvider(args.log, echo_secret=args.echo_client_secret, people=base if args.people else None)
    server = MCPServer(
        "oauth-fake",
        version="1.0",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/other" if args.wrong_resource else f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
        ),
    )

    @server.tool(description="Echo the text back")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Revoke every access token (refresh tokens stay valid)")
    def forget_access() -> str:
        provider.access.clear()
        return "access tokens revoked"

    @server.tool(description="Revoke every access and refresh token")
    def forget_all() -> str:
        provider.access.clear()
        provider.refresh.clear()
        return "all tokens revoked"

    @server.tool(description="Show the credentials this request came with")
    def show_credentials(ctx: Context) -> str:
        request: Any = ctx.request_context.request
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        return f"scheme {scheme}; credential {credential}"

    if args.people:  # the tools of a backend reached as each person

        @server.tool(description="Who this request acts for, by the token it came with")
        def whoami(ctx: Context) -> str:
            request: Any = ctx.request_context.request
            credential = request.headers.get("authorization", "").partition(" ")[2]
            token = provider.access.get(credential)
            if token is None:
                return "nobody"
            return f"you are {token.subject or 'the client'}; scopes: {' '.join(sorted(token.scopes)) or 'none'}"

        @server.tool(description="An action that needs the admin scope")
        def admin_action() -> str:
            return "admin action done"

        @server.resource(BOARD, name="board", description="The board each person's changes are announced on")
        def board() -> str:
            return "the board"

        @server.resource("note://slow/{seconds}", name="slow", description="Read after some seconds")
        async def slow_note(seconds: str) -> str:
            provider.note("reads slowly")
            await anyio.sleep(float(seconds))
            return f"read after {seconds} s"

        @server.tool(description="Change the board: says so to this session (resources/updated, list_changed)")
        async def touch(ctx: Context) -> str:
            updated = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=BOARD))
            for notification in (updated, types.ResourceListChangedNotification()):
                await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
            return "touched"

    @server.custom_route("/login", methods=["GET"])
    async def login(request: Request) -> Response:
        waiting = provider.waiting.pop(request.query_params.get("request", ""), None)
        if waiting is None:
            return HTMLResponse("<h1>no such authorization request</h1>", status_code=400)
        client, params = waiting
        user = request.cookies.get("user") or request.query_params.get("login_hint")
        if not user:
            return HTMLResponse("<h1>sign in first</h1>", status_code=401)
        return RedirectResponse(provider.approve(client, params, user), status_code=302)

    app = server.streamable_http_app()

    async def hostile(scope: Any, receive: Any, send: Any) -> None:
        if args.token_answer and scope["type"] == "http" and scope["path"] == "/token":
            await _bad_token_answer(args.token_answer, provider, receive, send)
            return
        if args.exchange_issuer and scope["type"] == "http" and scope["path"] == "/token":
            await _exchange(app, provider, base, args.exchange_issuer, args.exchange_client, scope, receive, send)
            return
        if (args.exchange_issuer or args.people) and scope["type"] == "http" and scope["path"] == "/mcp":
            credential = dict(scope["headers"]).get(b"authorization", b"").decode().partition(" ")[2]
            provider.note(f"saw {credential or '(none)'}")
        if args.people and scope["type"] == "http" and scope["path"] == "/mcp" and scope["method"] == "POST":
            await _step_up(app, provider, base, scope, receive, send, never=args.never_accept)
            return
        await app(scope, receive, send)

    uvicorn.run(hostile, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


async def _body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _replaying(body: bytes, receive: Any) -> Any:
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _json_answer(send: Any, status: int, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


async def _exchange(
    app: Any,
    provider: MemoryProvider,
    base: str,
    issuer: str,
    client: str | None,
    scope: Any,
    receive: Any,
    send: Any,
) -> None:
    """RFC 8693 at /token; any other grant goes to the SDK's token endpoint as it came."""
    body = await _body(receive)
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
        await app(scope, _replaying(body, receive), send)
        return
    if client is not None:
        sent = dict(scope["headers"]).get(b"authorization", b"").decode()
        if sent != "Basic " + base64.b64encode(client.encode()).decode():
            await _json_answer(send, 401, {"error": "invalid_client"})
            return
    if form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt":
        await _json_answer(send, 400, {"error": "invalid_request", "error_description": "subject_token_type"})
        return
    if form.get("resource") != f"{base}/mcp" or form.get("audience") != f"{base}/mcp":
        await _json_answer(send, 400, {"error": "invalid_target"})
        return
    try:
        keys = jwt.PyJWKClient(f"{issuer}/jwks.json")
        key = keys.get_signing_key_from_jwt(form.get("subject_token", ""))
        claims = jwt.decode(
            form.get("subject_token", ""), key.key, algorithms=["RS256"], issuer=issuer, options={"verify_aud": False}
        )
    except jwt.PyJWTError:
        await _json_answer(send, 400, {"error": "invalid_grant"})
        return
    subject = str(claims["sub"])
    access = secrets.token_urlsafe(24)
    provider.access[access] = AccessToken(
        token=access, client_id="exchange", scopes=["read"], resource=f"{base}/mcp", subject=subject
    )
    provider.note(f"exchanged for {subject}")
    await _json_answer(
        send,
        200,
        {
            "access_token": access,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer",
            "expires_in": 3600,
        },
    )


async def _step_up(
    app: Any, provider: MemoryProvider, base: str, scope: Any, receive: Any, send: Any, *, never: bool
) -> None:
    """A call of STEP_UP_TOOL with a token that lacks "admin" (any token, if `never`) is refused with 403
    insufficient_scope (RFC 6750), naming the scope it needs; every other request goes to the server as it came."""
    body = await _body(receive)
    try:
        request = json.loads(body)
    except ValueError:
        request = None
    called = isinstance(request, dict) and request.get("method") == "tools/call"
    if called and (request.get("params") or {}).get("name") == STEP_UP_TOOL:
        credential = dict(scope["headers"]).get(b"authorization", b"").decode().partition(" ")[2]
        token = provider.access.get(credential)
        if token is not None and ("admin" not in token.scopes or never):
            provider.note("step-up asked")
            challenge = (
                f'Bearer error="insufficient_scope", scope="read admin", '
                f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
            )
            headers = [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
    await app(scope, _replaying(body, receive), send)


async def _bad_token_answer(kind: str, provider: MemoryProvider, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass  # the form, read whole: what `receive` gives next is the client hanging up
    media = b"text/html" if kind == "html" else b"application/json"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", media)]})
    if kind == "html":
        body = b'{"access_token": "AT-html-answer-123456", "token_type": "Bearer", "expires_in": 3600}'
        await send({"type": "http.response.body", "body": body})
        return
    sent = 0
    chunk = b"A" * (1 << 20)
    async with anyio.create_task_group() as tg:

        async def until_hung_up() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(until_hung_up)
        await send({"type": "http.response.body", "body": b'{"access_token": "', "more_body": True})
        for _ in range(150):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            sent += len(chunk)
            await anyio.lowlevel.checkpoint()  # once the client hung up, `send` returns without waiting
        await send({"type": "http.response.body", "body": b'", "token_type": "Bearer"}'})
        tg.cancel_scope.cancel()
    provider.note(f"token answer sent {sent}")


if __name__ == "__main__":
    main()
