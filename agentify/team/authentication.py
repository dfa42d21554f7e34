"""`server.auth` and `server.publicUrl` as HTTP serving applies them: the verifier, the bearer check in
front of the MCP endpoint, the RFC 9728 metadata of a JWT resource server, and the allowed Host.

`protect` is the one place that reads them; the checks themselves are `bearer.RequireBearer` over
`SharedTokenVerifier`, `TeamTokensVerifier` or `jwt_auth.JwtVerifier`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loguru import logger
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentify._common.errors import StartFailed
from agentify.config.server import JwtAuth, ServerConfig, TokensAuth
from agentify.security.redact import Redactor
from agentify.team.bearer import RequireBearer, SharedTokenVerifier, TeamTokensVerifier, Verifier
from agentify.team.http_auth import NO_AUTH_HOSTS
from agentify.team.jwt_auth import JwtVerifier
from agentify.team.tokens_file import TokensFileError

_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


@dataclass(frozen=True)
class Protected:
    app: Any
    public: dict[str, Any] = field(default_factory=dict)
    """Routes served without a token (the OAuth protected-resource metadata), by path."""


def protect(
    app: Any,
    server: ServerConfig,
    redactor: Redactor,
    reveal: Callable[[str], None],
    *,
    endpoint: str,
    shared_token: str | None,
) -> Protected:
    """`app` behind the bearer check `server.auth` names. `endpoint` is the MCP URL as bound
    (`server.publicUrl` wins); `shared_token` is the token of type `token`, None with `--no-auth`; the
    log masks it (`redactor`) except in the one line `reveal` writes, which hands a generated one out.

    Raises:
        StartFailed: the tokens file cannot be read."""
    auth = server.auth
    resource = server.public_url or endpoint
    if isinstance(auth, TokensAuth | JwtAuth) and os.environ.get("AGENTIFY_HTTP_TOKEN"):
        logger.warning("AGENTIFY_HTTP_TOKEN is ignored: server.auth type {} decides who gets in", auth.type)
    if isinstance(auth, JwtAuth):
        settings = AuthSettings(
            issuer_url=AnyHttpUrl(auth.issuer),
            resource_server_url=AnyHttpUrl(resource),
            required_scopes=auth.required_scopes or None,
            validate_token_resource=False,  # the verifier checks `aud` itself
        )
        audience = auth.audience or resource
        metadata = build_resource_metadata_url(AnyHttpUrl(resource))
        route = _metadata_route(urlsplit(str(metadata)).path, resource, auth.issuer, settings.required_scopes)
        logger.info("clients must send JWTs of {} for {} (metadata: {})", auth.issuer, audience, metadata)
        guarded = RequireBearer(
            app,
            JwtVerifier(auth, audience),
            hint=f"Send 'Authorization: Bearer <a JWT of {auth.issuer} for {audience}>'",
            required_scopes=settings.required_scopes,
            resource_metadata_url=str(metadata),
        )
        return Protected(guarded, {route.path: route})
    verifier: Verifier
    if isinstance(auth, TokensAuth):
        try:
            verifier = TeamTokensVerifier(Path(auth.file))
        except TokensFileError as exc:
            raise StartFailed(f"{exc}; create or fix it with 'agentify token add NAME'") from None
        logger.info("clients must send their own token (server.auth: the tokens file {})", auth.file)
        hint = "Send 'Authorization: Bearer <your token>': whoever runs the gateway gives one with 'agentify token add'"
        return Protected(RequireBearer(app, verifier, hint=hint, required_scopes=auth.required_scopes))
    if shared_token is None:
        logger.warning("serving MCP on {} without authentication (--no-auth): any local process can use it", endpoint)
        return Protected(app)
    redactor.add([shared_token])
    if os.environ.get("AGENTIFY_HTTP_TOKEN"):
        logger.info("clients must send 'Authorization: Bearer <the value of AGENTIFY_HTTP_TOKEN>'")
    else:
        reveal(f"clients must send 'Authorization: Bearer {shared_token}' (AGENTIFY_HTTP_TOKEN fixes it)")
    hint = "Send 'Authorization: Bearer <token>' with AGENTIFY_HTTP_TOKEN, or the token agentify logged when it started"
    return Protected(RequireBearer(app, SharedTokenVerifier(shared_token), hint=hint))


def _metadata_route(path: str, resource: str, issuer: str, scopes: list[str] | None) -> Route:
    """RFC 9728's metadata with the resource and the issuer exactly as configured: the SDK's model adds a
    trailing slash to a URL without a path, and clients compare the issuer exactly (RFC 8414)."""
    document: dict[str, Any] = {"resource": resource, "authorization_servers": [issuer]}
    document |= {"scopes_supported": scopes} if scopes else {}
    document["bearer_methods_supported"] = ["header"]

    async def metadata(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    return Route(path, endpoint=cors_middleware(metadata, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"])


def host_check(host: str, server: ServerConfig) -> TransportSecuritySettings | None:
    """The Host and Origin a request may carry: loopback's on a loopback bind (against DNS rebinding, as the
    SDK's own default), and `publicUrl`'s own. None (any) on another bind without `publicUrl`."""
    loopback = host in NO_AUTH_HOSTS
    hosts, origins = (list(_LOOPBACK_HOSTS), list(_LOOPBACK_ORIGINS)) if loopback else ([], [])
    if server.public_url is not None:
        public = urlsplit(server.public_url)
        hosts += [public.netloc, f"{public.hostname}:*"]
        origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins) if hosts else None
