"""Who an HTTP client is: the bearer token of every request, checked by the verifier `server.auth` names.

Each verifier is a `TokenVerifier` of the MCP SDK and answers the SDK's `AccessToken`, whose subject
is the principal (`telemetry.principal`): the shared token (`SharedTokenVerifier`), a person's token
from the tokens file (`TeamTokensVerifier`), or a JWT (`jwt_auth.JwtVerifier`). `RequireBearer` puts
the checked token where the SDK looks for it (`scope["user"]`, which binds a 2025-11-25 session to
its creator, and `get_access_token()`), and answers everyone else as RFC 6750 and RFC 9728 say:
401 with `WWW-Authenticate: Bearer error=... resource_metadata=...` and a description that says
what to do, 403 `insufficient_scope` for a token without a required scope, and 429 instead of 401 while
the address backs off after repeated 401s (`http_auth.Backoff`): a token that verifies is never refused
by the back-off, so one broken client behind an office NAT or a proxy locks out nobody with a valid
token. No token is ever logged.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
from loguru import logger
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials

from agentify.team.http_auth import Backoff, refuse
from agentify.team.principal import SHARED, Who
from agentify.team.tokens_file import (
    Person,
    TokensFileError,
    check_private,
    digest,
    people_by_digest,
    read_entries,
)


@dataclass(frozen=True)
class Refusal:
    """Why a token was not accepted, as the client is told it (never the token itself)."""

    reason: str


class Verifier(Protocol):
    """A `TokenVerifier` that can also say why it refused."""

    async def check(self, token: str) -> AccessToken | Refusal: ...

    async def verify_token(self, token: str) -> AccessToken | None: ...


class VerifierBase:
    """The SDK's `TokenVerifier` method over `check`."""

    async def check(self, token: str) -> AccessToken | Refusal:
        raise NotImplementedError

    async def verify_token(self, token: str) -> AccessToken | None:
        checked = await self.check(token)
        return checked if isinstance(checked, AccessToken) else None


class SharedTokenVerifier(VerifierBase):
    """`server.auth` type `token`: one token for everyone, so one principal, `SHARED`."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def check(self, token: str) -> AccessToken | Refusal:
        if not secrets.compare_digest(token.encode(errors="surrogateescape"), self._expected):
            return Refusal("the token is not this gateway's")
        return AccessToken(token=token, client_id=SHARED, scopes=[], subject=SHARED)


class TeamTokensVerifier(VerifierBase):
    """`server.auth` type `tokens`: each person's token, looked up by its sha256 in the tokens file.

    The file is read again when it changes (its size, time or inode), so `agentify token add` and
    `remove` take effect on the next request without a restart; the `removed` listeners then hear the
    names that are gone (their requests and sessions are ended). A file that turns unreadable or
    invalid keeps the last good tokens, and the problem is logged once."""

    def __init__(self, path: Path) -> None:
        """Raises TokensFileError: the file cannot be read or is not a tokens file."""
        self._path = path
        self._stamp = self._current_stamp()
        check_private(path)
        self._people: dict[str, Person] = people_by_digest(read_entries(path))
        self._problem: str | None = None
        self.removed: list[Callable[[set[str]], Awaitable[None]]] = []
        if not self._people:
            logger.warning("the tokens file {} holds no tokens yet: add one with 'agentify token add NAME'", path)

    async def check(self, token: str) -> AccessToken | Refusal:
        if gone := self._refresh():
            for listener in list(self.removed):
                await listener(gone)
        person = self._people.get(digest(token))
        if person is None:
            return Refusal("the token is not in this gateway's tokens file (removed, or never added)")
        return AccessToken(
            token=token,
            client_id=person.name,
            scopes=list(person.scopes),
            subject=person.name,
            claims={TOKENS_FILE_GROUPS: list(person.groups)},
        )

    def _current_stamp(self) -> tuple[int, ...] | None:
        """What says the file changed: its content's time and size, its inode, and its owner and mode."""
        try:
            info = os.stat(self._path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size, info.st_ino, info.st_uid, info.st_mode

    def _refresh(self) -> set[str]:
        """Reads the file again when it changed: the names it no longer holds."""
        stamp = self._current_stamp()
        if stamp == self._stamp:
            return set()
        self._stamp = stamp
        before = {person.name for person in self._people.values()}
        try:
            if stamp is None:
                raise TokensFileError(f"the tokens file {self._path} is gone")
            check_private(self._path)
            self._people = people_by_digest(read_entries(self._path))
        except TokensFileError as exc:
            if str(exc) != self._problem:
                logger.error("{}: the tokens read before stay in use until it is fixed", exc)
            self._problem = str(exc)
            return set()
        self._problem = None
        logger.info("the tokens file {} changed: {} tokens", self._path, len(self._people))
        return before - {person.name for person in self._people.values()}


class RequireBearer:
    """ASGI middleware in front of the MCP endpoint (see the module docstring); lifespan passes through.
    Put `NoWebSockets` in front: this answers HTTP only."""

    def __init__(
        self,
        app: Any,
        verifier: Verifier,
        *,
        hint: str,
        required_scopes: list[str] | None = None,
        resource_metadata_url: str | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self._app = app
        self._verifier = verifier
        self._hint = hint
        self._required = required_scopes or []
        self._metadata = f'resource_metadata="{resource_metadata_url}"' if resource_metadata_url else ""
        self._backoff = backoff or Backoff()
        self._live: dict[str, set[anyio.CancelScope]] = {}
        self.on_removed(self._end_requests)
        self.max_open: int | None = None
        """The most requests one principal may have open at once (`server.maxOpenRequestsPerPrincipal`):
        its streams (a 2025-11-25 session's GET, a 2026-07-28 `subscriptions/listen`) and calls in flight."""

    def on_removed(self, listener: Callable[[set[str]], Awaitable[None]]) -> None:
        """`listener` hears the principals whose tokens were removed (tokens file only; others never remove)."""
        if isinstance(self._verifier, TeamTokensVerifier):
            self._verifier.removed.append(listener)

    async def _end_requests(self, principals: set[str]) -> None:
        """The requests in flight of removed principals end now: their open streams stop receiving."""
        for principal in principals:
            for scope in self._live.pop(principal, set()):
                scope.cancel()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        address = str((scope.get("client") or ("unknown",))[0])
        token = _bearer(scope)
        checked = await self._verifier.check(token) if token else Refusal("no bearer token was sent")
        if isinstance(checked, Refusal):
            wait = self._backoff.retry_after(address)
            self._backoff.failed(address)
            if wait > 0:
                challenge = self._challenge()
                await refuse(send, 429, "too_many_failures", _BACKING_OFF, challenge=challenge, retry_after=wait)
                return
            error = 'error="invalid_token"' if token else ""
            await refuse(
                send, 401, "invalid_token", f"{checked.reason}. {self._hint}", challenge=self._challenge(error)
            )
            return
        # A token that verifies always gets in, back-off or not: the address may be a NAT, a VPN or a proxy
        # that others share. It clears the address's count, as before.
        self._backoff.succeeded(address)
        if missing := [s for s in self._required if s not in checked.scopes]:
            needed = " ".join(self._required)
            message = f"the token lacks the scope {', '.join(missing)}: ask for a token with the scopes {needed}"
            challenge = self._challenge(f'error="insufficient_scope", scope="{needed}"')
            await refuse(send, 403, "insufficient_scope", message, challenge=challenge)
            return
        user = AuthenticatedUser(checked)
        scope["user"], scope["auth"] = user, AuthCredentials(checked.scopes)
        reset = auth_context_var.set(user)
        principal = checked.subject or checked.client_id
        if self.max_open is not None and len(self._live.get(principal, ())) >= self.max_open:
            why = (
                f"{principal!r} has {self.max_open} requests open at once (streams and calls in flight), the most one "
                "principal may (server.maxOpenRequestsPerPrincipal): close a stream or wait for a call to end"
            )
            await refuse(send, 429, "too_many_open_requests", why, challenge=self._challenge(), retry_after=1)
            return
        live = self._live.setdefault(principal, set())
        response = _Response(send)
        with anyio.CancelScope() as cancel:
            live.add(cancel)
            try:
                await self._app(scope, receive, response.send)
            finally:
                auth_context_var.reset(reset)
                live.discard(cancel)
                if not live and self._live.get(principal) is live:
                    del self._live[principal]
        if cancel.cancelled_caught and not response.ended:  # its token was removed meanwhile
            if response.started:  # a stream: it ends here, as a whole response
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                why = f"the token of {principal!r} was removed from the tokens file. {self._hint}"
                await refuse(send, 401, "invalid_token", why, challenge=self._challenge('error="invalid_token"'))

    def _challenge(self, *parameters: str) -> str:
        return "Bearer " + ", ".join(p for p in ('realm="agentify"', *parameters, self._metadata) if p)


TOKENS_FILE_GROUPS = "agentify/groups"
"""Where a tokens-file principal's groups are kept among its access token's claims."""
JWT_CLAIMS = "agentify/jwt"
"""Where a JWT's own claims are kept among them."""


def who_of(request: Any, default: str, groups_claim: str) -> Who:
    """The principal of an MCP request with its groups and scopes: `groups_claim` names the JWT claim that
    lists the groups (a list, or a space-separated string); the tokens file's own are kept apart."""
    user = request.scope.get("user") if request is not None else None
    if not isinstance(user, AuthenticatedUser):
        return Who(default)
    token = user.access_token
    claims = token.claims or {}
    jwt_claims = claims.get(JWT_CLAIMS)
    groups = jwt_claims.get(groups_claim) if isinstance(jwt_claims, dict) else claims.get(TOKENS_FILE_GROUPS)
    if isinstance(groups, str):
        groups = groups.split()
    listed = frozenset(g for g in groups if isinstance(g, str) and g) if isinstance(groups, list) else frozenset()
    return Who(token.subject or token.client_id, listed, frozenset(token.scopes))


class _Response:
    """The ASGI `send` of one request, and how far its response went."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self.started = self.ended = False

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended = True
        await self._send(message)


def principal_of(request: Any, default: str) -> str:
    """The principal of an MCP request: its access token's subject, else `default` (`--no-auth`).
    `request` is the HTTP request the SDK hands a handler."""
    user = request.scope.get("user") if request is not None else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token.subject or user.access_token.client_id
    return default


_BACKING_OFF = "too many requests without a valid token came from this address; wait and try again"


def _bearer(scope: dict[str, Any]) -> str | None:
    header = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
    scheme, _, token = header.decode("latin-1").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None
