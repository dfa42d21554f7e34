"""`"auth": {"type": "exchange"}`: each principal's own token (their JWT, `server.auth` type `jwt`) exchanged at the
backend's authorization server for a token meant for the backend (RFC 8693), never passed on as it came.

The authorization server is found as for `oauth` (RFC 9728 protected-resource metadata, then RFC 8414
authorization-server metadata, whose `issuer` must be the one named), through the SDK's discovery helpers. The
request names the backend both as RFC 8707 `resource` and as `audience`, carries the JWT as the subject token
(`urn:ietf:params:oauth:token-type:jwt`), and authenticates with `clientId`/`clientSecret` (HTTP basic) when they
are configured. The token it gives is kept per principal, in this process, until it expires.

The exchange happens in the caller's own task (`ensure`), where the inbound token is at hand; the session's
requests, made in the transport's tasks, only read what was exchanged (`ExchangedAuth`).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx2
from loguru import logger
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    validate_metadata_issuer,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from agentify.backends.bounded_http import AnswerBounds
from agentify.backends.oauth import SecretSink
from agentify.config import BackendConfig, ExchangeSettings
from agentify.errors import BackendUnavailable
from agentify.security.credentials import mask_url

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_JWT = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
EXCHANGE_SECONDS = 10.0
EARLY_SECONDS = 30.0  # an exchanged token is renewed this long before it expires
DEFAULT_LIFETIME = 300.0  # when the answer gives no expires_in


@dataclass(frozen=True)
class _Issued:
    token: str
    expires: float


class Exchanger:
    """The exchanged tokens of one backend, by principal."""

    def __init__(self, spec: BackendConfig, secrets: SecretSink | None = None) -> None:
        assert isinstance(spec.auth, ExchangeSettings) and spec.url is not None
        self._spec = spec
        self._settings = spec.auth
        self._secrets = secrets
        self._issued: dict[str, _Issued] = {}
        self._endpoint: tuple[str, str] | None = None  # (token endpoint, resource)
        self._lock = anyio.Lock()
        self._where = mask_url(spec.url)

    def stamp(self, principal: str) -> float:
        """Changes whenever a new token is exchanged for `principal` (so a session refused before starts again)."""
        issued = self._issued.get(principal)
        return issued.expires if issued is not None else 0.0

    def token_for(self, principal: str) -> str | None:
        issued = self._issued.get(principal)
        return issued.token if issued is not None and issued.expires > time.time() else None

    def drop(self, principal: str) -> None:
        self._issued.pop(principal, None)

    async def ensure(self, principal: str, subject_token: str | None) -> None:
        """A token for `principal` that is good for a while yet, exchanged now if needed.

        Raises:
            BackendUnavailable: there is no inbound token to exchange, or the exchange failed (the message says
                why; it never holds a token).
        """
        issued = self._issued.get(principal)
        if issued is not None and issued.expires - EARLY_SECONDS > time.time():
            return
        if not subject_token:
            raise BackendUnavailable(
                f"backend {self._spec.id!r} is reached with each person's own token exchanged (auth type exchange), "
                "and this request came without one: it needs a client authenticated with a JWT (server.auth jwt)"
            )
        async with self._lock:
            endpoint, resource = await self._discovered()
        self._issued[principal] = await self._exchange(endpoint, resource, subject_token)

    async def _discovered(self) -> tuple[str, str]:
        if self._endpoint is None:
            try:
                with anyio.fail_after(EXCHANGE_SECONDS):
                    self._endpoint = await self._discover()
            except (httpx2.HTTPError, TimeoutError, ValueError) as exc:
                raise BackendUnavailable(
                    f"backend {self._spec.id!r}: its authorization server could not be found from {self._where} "
                    f"({type(exc).__name__}: {str(exc)[:200]}); check the backend's url"
                ) from None
        return self._endpoint

    async def _discover(self) -> tuple[str, str]:
        assert self._spec.url is not None
        server_url = self._spec.url
        resource = resource_url_from_server_url(server_url)
        issuer: str | None = None
        async with _client(server_url) as http:
            for url in build_protected_resource_metadata_discovery_urls(None, server_url):
                prm = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(url)))
                if prm is not None:
                    named = str(prm.resource) if prm.resource else None
                    if named and not check_resource_allowed(requested_resource=resource, configured_resource=named):
                        raise ValueError(f"its protected-resource metadata names another resource ({named})")
                    resource = named or resource
                    issuer = str(prm.authorization_servers[0]) if prm.authorization_servers else None
                    break
            for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
                ok, metadata = await handle_auth_metadata_response(await http.send(create_oauth_metadata_request(url)))
                if not ok:
                    break
                if metadata is not None:
                    parts = urlsplit(server_url)
                    validate_metadata_issuer(metadata, issuer or f"{parts.scheme}://{parts.netloc}")
                    return str(metadata.token_endpoint), resource
        raise ValueError("no authorization-server metadata was found")

    async def _exchange(self, endpoint: str, resource: str, subject_token: str) -> _Issued:
        form = {
            "grant_type": GRANT,
            "subject_token": subject_token,
            "subject_token_type": SUBJECT_JWT,
            "requested_token_type": ACCESS_TOKEN,
            "resource": resource,
            "audience": resource,
        }
        if self._settings.scopes:
            form["scope"] = " ".join(self._settings.scopes)
        auth: httpx2.BasicAuth | None = None
        if self._settings.client_id and self._settings.client_secret:
            auth = httpx2.BasicAuth(self._settings.client_id, self._settings.client_secret)
        elif self._settings.client_id:
            form["client_id"] = self._settings.client_id
        try:
            with anyio.fail_after(EXCHANGE_SECONDS):
                async with _client(self._spec.url or "") as http:
                    if auth is not None:
                        answer = await http.post(endpoint, data=form, auth=auth)
                    else:
                        answer = await http.post(endpoint, data=form)
                    json_answer = answer.headers.get("content-type", "").startswith("application/json")
                    body = answer.json() if json_answer else {}
        except (httpx2.HTTPError, TimeoutError, ValueError) as exc:
            raise BackendUnavailable(
                f"backend {self._spec.id!r}: the token exchange at {mask_url(endpoint)} failed ({type(exc).__name__})"
            ) from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if answer.status_code != 200 or not isinstance(token, str) or not token:
            why = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), str) else None
            raise BackendUnavailable(
                f"backend {self._spec.id!r}: the authorization server refused to exchange your token for one meant "
                f"for the backend (HTTP {answer.status_code}{f', {why}' if why else ''}); ask its administrator "
                "whether your account may use it"
            )
        if self._secrets is not None:
            self._secrets([token])
        lifetime = body.get("expires_in")
        seconds = float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else DEFAULT_LIFETIME
        logger.bind(backend=self._spec.id).info("exchanged a person's token for one meant for the backend")
        return _Issued(token, time.time() + seconds)


class ExchangedAuth(httpx2.Auth):
    """Every request of one principal's session carries the token exchanged for them (none once it expired: the
    server's 401 then ends the session, and the next call exchanges again)."""

    def __init__(self, exchanger: Exchanger, principal: str) -> None:
        self._exchanger = exchanger
        self._principal = principal

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        token = self._exchanger.token_for(self._principal)
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request

    def stamp(self) -> float:
        return self._exchanger.stamp(self._principal)


def _client(server_url: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(EXCHANGE_SECONDS), event_hooks=AnswerBounds(server_url).hooks(), follow_redirects=False
    )
