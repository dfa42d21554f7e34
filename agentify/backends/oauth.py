"""OAuth 2.1 for remote backends, through the SDK's `OAuthClientProvider` (discovery, registration, PKCE, refresh).

agentify adds only what the SDK leaves to its caller: where tokens live (one file per backend
in the user's config dir, mode 0600), and who answers the authorization redirect. While
serving, nobody can: a server that asks for a new authorization makes the backend
`needs_auth`. `agentify auth <backend>` answers it with a browser and a loopback redirect
(`login.py`).

Three things the SDK's provider does not do on its own:
- A scope step-up (HTTP 403 `insufficient_scope`) while serving is remembered in the token file,
  so that the next `agentify auth` asks for the escalated scope (the SDK keeps it in memory only).
- A configured `clientMetadataUrl` is the client id where the server supports Client ID Metadata
  Documents (the SDK registers dynamically elsewhere).
- On the 2025-03-26 layout (no protected-resource metadata, authorization-server metadata at the
  server's root), metadata whose issuer is on the server's own origin but has a path is accepted:
  the SDK expects the bare origin (RFC 8414 section 3.3), but that layout makes the origin the
  authorization server, so nobody else's issuer can be claimed this way. An issuer on another
  origin is still refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from loguru import logger
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, ValidationError

from agentify._common.dirs import user_dir
from agentify._common.private_files import read_private, write_private
from agentify.backends.connection import AuthRequired
from agentify.backends.token_refresh import refresh_lock
from agentify.config import BackendConfig, OAuthSettings

PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"  # while serving nobody receives a redirect
SecretSink = Callable[[Iterable[str]], None]
"""Where credentials learnt while running go (the redactor's `add`), so every sink masks them."""


def config_dir() -> Path:
    """AGENTIFY_CONFIG_DIR, else the user's config dir for agentify ($XDG_CONFIG_HOME/agentify, ~/.config/agentify)."""
    return user_dir("config")


class TokenFile:
    """The SDK's `TokenStorage` for one backend: tokens and client registration in one 0600 JSON file, in a
    directory private to the user (`_common.private_files`: never written through a symbolic link).

    `secrets` hears every token and client secret read or written, so each sink masks them from then on
    (a server that echoes the `Authorization` header back must not show `Bearer <token>` in a result)."""

    def __init__(self, spec: BackendConfig, directory: Path | None = None, secrets: SecretSink | None = None) -> None:
        assert spec.url is not None
        digest = hashlib.sha256(spec.url.encode()).hexdigest()[:12]
        self.directory = (directory or config_dir()) / "oauth"
        self.name = f"{spec.id}-{digest}.json"
        self.path = self.directory / self.name
        self._backend = spec.id
        self._secrets = secrets
        self._told: set[str] = set()

    def _read(self) -> dict[str, Any]:
        try:
            content = read_private(self.directory, self.name)
            data = json.loads(content) if content is not None else {}
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            logger.bind(backend=self._backend).warning("ignoring the unreadable token file {}: {}", self.path, why)
            return {}
        if not isinstance(data, dict):
            return {}
        self._tell(data)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self._tell(data)
        write_private(self.directory, self.name, json.dumps(data).encode())

    def _tell(self, data: dict[str, Any]) -> None:
        if self._secrets is None:
            return
        tokens, client = (part if isinstance(part := data.get(key), dict) else {} for key in ("tokens", "client"))
        found = {tokens.get("access_token"), tokens.get("refresh_token"), client.get("client_secret")}
        values = {value for value in found if isinstance(value, str) and value not in self._told}
        if values:
            self._told |= values
            self._secrets(values)

    def stamp(self) -> float:
        """Changes whenever the file is written (so a running gateway notices `agentify auth`)."""
        try:
            return os.lstat(self.path).st_mtime_ns / 1e9
        except OSError:
            return 0.0

    def has_tokens(self) -> bool:
        return bool(self._read().get("tokens"))

    def expires_at(self) -> float | None:
        value = self._read().get("expiresAt")
        return float(value) if isinstance(value, int | float) else None

    def expire(self) -> bool:
        """Marks the access token as expired so the next session refreshes it; False without a refresh token,
        or when the server wants a scope the tokens lack (a refresh never widens the scope)."""
        data = self._read()
        if not (data.get("tokens") or {}).get("refresh_token") or self.missing_scope():
            return False
        data["expiresAt"] = 1.0  # long past (0 would read as "no expiry" to the SDK)
        self._write(data)
        return True

    def wanted_scope(self) -> str | None:
        """The scope the server asked for when nobody could authorize (a step-up while serving)."""
        value = self._read().get("wantedScope")
        return value if isinstance(value, str) and value else None

    def set_wanted_scope(self, scope: str | None) -> None:
        data = self._read()
        if data.get("wantedScope") != scope:  # unchanged: no write, so a gateway does not see new credentials
            data["wantedScope"] = scope
            self._write(data)

    def granted_scope(self) -> str | None:
        """The scope the stored tokens were granted."""
        tokens = self._read().get("tokens") or {}
        granted = tokens.get("scope") if isinstance(tokens, dict) else None
        return granted if isinstance(granted, str) and granted else None

    def missing_scope(self) -> set[str]:
        """The wanted scopes the stored tokens were not granted."""
        return set((self.wanted_scope() or "").split()) - set((self.granted_scope() or "").split())

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._read().get("tokens")
        try:
            return OAuthToken.model_validate(tokens) if tokens else None
        except ValidationError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expiresAt"] = time.time() + tokens.expires_in if tokens.expires_in else None
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self._read().get("client")
        try:
            return OAuthClientInformationFull.model_validate(client) if client else None
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    def token_set(self) -> str:
        """Names the tokens this store holds, for the lock that lets one provider of this process refresh them at a
        time (`token_refresh`)."""
        return str(self.path)

    def redirect_uri(self) -> str | None:
        """The loopback redirect the client was registered with, so a new login reuses its port."""
        uris = (self._read().get("client") or {}).get("redirect_uris") or []
        return str(uris[0]) if uris else None


class _Provider(OAuthClientProvider):
    """The SDK's provider; stored tokens also bring back their expiry, so an expired one is refreshed. The
    overrides are the module docstring's three additions; `serving`: nobody can open a browser."""

    def __init__(self, store: TokenFile, serving: bool, **options: Any) -> None:
        super().__init__(storage=store, **options)
        self._store = store
        self._serving = serving
        self._legacy_issuer: str | None = None
        self._stamp = 0.0
        self._refresh_lock = refresh_lock(store.token_set())

    async def _initialize(self) -> None:
        # Taken first: stored tokens that change while they load (another replica refreshed them) are loaded
        # again on the next request.
        self._stamp = self._store.stamp()
        await super()._initialize()
        self.context.token_expiry_time = self._store.expires_at()

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        metadata = self.context.client_metadata
        if self._serving:
            if metadata.scope:
                self._store.set_wanted_scope(metadata.scope)  # the SDK's union of granted and challenged scopes
            raise AuthRequired("the server asks for a new authorization")
        metadata.scope = union_scopes(metadata.scope, self._store.wanted_scope())
        return await super()._perform_authorization_code_grant()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._store.set_wanted_scope(None)  # authorized: what was wanted has been asked for

    def _expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self._legacy_issuer is not None:
            return self._legacy_issuer
        return super()._expected_issuer()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, once an expired token was refreshed one provider at a time (`token_refresh`), and started
        once more, expecting it, when 2025-03-26 metadata names an issuer on the server's origin with a path (the SDK
        decides the issuer it expects before it fetches the metadata)."""
        if self._initialized and self._store.stamp() != self._stamp:
            self._initialized = False  # new tokens were stored (a person authorized again): the next request uses them
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            if self._must_refresh():
                self.context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)  # RFC 8707 resource
                async with self._refresh_lock:  # single-flight: see `token_refresh`
                    await self._initialize()  # read again: another provider (or process) may have refreshed them
                    if self._must_refresh():
                        await self._refreshed((yield await self._refresh_token()))
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if self._serving and outgoing is request and _is_step_up(response):
                    # The token works, but this request needs more scope: the scope is remembered (what was
                    # granted plus what the server names) and the 403 is this request's answer, so the session
                    # stays up for everything the token allows (the SDK would end it, asking for a browser).
                    granted = self.context.current_tokens.scope if self.context.current_tokens else None
                    wanted = union_scopes(union_scopes(granted, self._store.wanted_scope()), _challenged(response))
                    self._store.set_wanted_scope(wanted)
                    logger.info("the server asks for more scope ({}) for one request", wanted)
                    return
                if self._legacy_issuer is None and (issuer := await self._same_origin_issuer(outgoing, response)):
                    self._legacy_issuer = issuer
                    await flow.aclose()
                    flow = super()._auth_flow(request)
                    outgoing = await flow.__anext__()
                else:
                    outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _must_refresh(self) -> bool:
        return not self.context.is_token_valid() and self.context.can_refresh_token()

    async def _refreshed(self, response: httpx2.Response) -> None:
        """The answer to a refresh (so the SDK's flow finds a valid token, or none). Refused because the refresh token
        was rotated meanwhile (another process refreshed, or `agentify auth` ran): the tokens it stored are used,
        instead of asking for a new authorization. Refused otherwise: the tokens are dropped (the SDK's behaviour)."""
        sent = self.context.current_tokens.refresh_token if self.context.current_tokens else None
        if response.status_code != 200:
            stored = await self._store.get_tokens()
            if stored is not None and stored.refresh_token and stored.refresh_token != sent:
                logger.info("the refresh token was rotated elsewhere meanwhile: using the tokens stored since")
                await self._initialize()
                return
        await self._handle_refresh_response(response)

    async def _same_origin_issuer(self, sent: httpx2.Request, response: httpx2.Response) -> str | None:
        """The issuer of 2025-03-26 metadata (fetched at the server's root) when it has the server's origin
        and a path: the one case where the SDK's expected issuer (the bare origin) is too strict."""
        server = urlsplit(self.context.server_url)
        legacy = f"{server.scheme}://{server.netloc}/.well-known/oauth-authorization-server"
        if self.context.auth_server_url is not None or str(sent.url) != legacy or response.status_code != 200:
            return None
        try:
            await response.aread()  # the SDK reads it again from memory
            issuer = response.json().get("issuer")
        except (ValueError, AttributeError):
            return None  # the SDK reports it
        if not isinstance(issuer, str):
            return None
        parts = urlsplit(issuer)
        same_origin = (parts.scheme, parts.netloc.lower()) == (server.scheme, server.netloc.lower())
        return issuer if same_origin and parts.path.strip("/") else None


def _is_step_up(response: httpx2.Response) -> bool:
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def _challenged(response: httpx2.Response) -> str | None:
    return extract_scope_from_www_auth(response)


class _ExpectedStop(logging.Filter):
    """The SDK logs every end of its OAuth flow as an ERROR with a traceback, also the one agentify asks for while
    serving (`AuthRequired`: a step-up, or a grant that ended, which a person answers). That one is an expected
    event: logged at INFO, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, AuthRequired):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = "OAuth flow stopped: %s", (str(error),)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_expected_stops() -> None:
    """Installs `_ExpectedStop` on the SDK's OAuth logger, once."""
    sdk = logging.getLogger("mcp.client.auth.oauth2")
    if not any(isinstance(f, _ExpectedStop) for f in sdk.filters):
        sdk.addFilter(_ExpectedStop())


def provider_for(
    spec: BackendConfig,
    store: TokenFile,
    *,
    redirect_uri: str | None = None,
    open_url: Callable[[str], Awaitable[None]] | None = None,
    callback: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
) -> OAuthClientProvider:
    """The SDK's OAuth provider for `spec`. Without `open_url` (serving), a needed authorization raises
    `AuthRequired` instead of opening anything, and the scope it would have asked for is remembered."""
    settings = spec.auth
    assert isinstance(settings, OAuthSettings) and spec.url is not None
    if open_url is None:
        quiet_expected_stops()
    redirect = redirect_uri or store.redirect_uri() or PLACEHOLDER_REDIRECT
    metadata = OAuthClientMetadata(
        client_name="agentify",
        redirect_uris=[AnyUrl(redirect)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(settings.scopes) if settings.scopes else None,
        token_endpoint_auth_method="client_secret_basic" if settings.client_secret else "none",
    )
    return _Provider(
        store,
        serving=open_url is None,
        server_url=spec.url,
        client_metadata=metadata,
        redirect_handler=open_url,
        callback_handler=callback,
        client_metadata_url=settings.client_metadata_url,
    )


async def preregister(spec: BackendConfig, store: TokenFile, redirect_uri: str) -> None:
    """A configured clientId (servers without dynamic registration) is stored as the client's registration."""
    settings = spec.auth
    assert isinstance(settings, OAuthSettings)
    if settings.client_id is None:
        return
    current = await store.get_client_info()
    if current is not None and current.client_id == settings.client_id:
        return
    await store.set_client_info(
        OAuthClientInformationFull(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_basic" if settings.client_secret else "none",
        )
    )
