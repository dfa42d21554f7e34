"""`server.auth` type `jwt`: agentify as an OAuth 2.1 resource server, verifying the issuer's JWTs.

PyJWT checks the signature against the issuer's keys (its JWKS: `jwksUrl`, or the `jwks_uri` of the
issuer's RFC 8414 / OpenID metadata), and `iss`, `aud`, `exp` and `nbf`. The key, chosen by the
token's `kid`, decides the algorithm: only asymmetric ones are accepted, so a token can choose
neither `none` nor HS256 with the public key as its secret. The JWKS is kept for `JWKS_MAX_AGE`
and fetched again at once for an unknown `kid` (a rotation), at most once per `MISS_COOLDOWN` when
that finds nothing new. A verified token is kept until it expires (at most `TOKEN_CACHE_SECONDS`),
so a client's every request costs one dictionary lookup.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from loguru import logger
from mcp.server.auth.provider import AccessToken

from agentify.config.server import JwtAuth
from agentify.team.bearer import JWT_CLAIMS, Refusal, VerifierBase

ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES256K", "ES384", "ES512", "EdDSA"}
)
JWKS_MAX_AGE = 600.0
MISS_COOLDOWN = 10.0
TOKEN_CACHE_SECONDS = 300.0
TOKEN_CACHE_SIZE = 10_000
LEEWAY_SECONDS = 30
FETCH_SECONDS = 5.0
"""The longest wait for one step of a fetch (connecting, each read): the issuer's metadata or its keys."""
FETCH_TOTAL_SECONDS = 10.0
"""The longest a whole fetch takes (discovery and keys, however slowly the issuer trickles its answer)."""
MAX_DOCUMENT_BYTES = 1024 * 1024


class IssuerUnreachable(Exception):
    """The issuer's metadata or keys could not be fetched; the message says which URL and why."""


class IssuerKeys:
    """The issuer's signing keys by `kid`, fetched on demand (see the module docstring)."""

    def __init__(self, issuer: str, jwks_url: str | None, total_seconds: float = FETCH_TOTAL_SECONDS) -> None:
        self._issuer = issuer
        self._jwks_url = jwks_url
        self._total_seconds = total_seconds
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched = 0.0
        self._missed = 0.0
        self._failure: tuple[float, str] | None = None
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key for `kid` (a token without one: the only key). Raises IssuerUnreachable."""
        if self._must_fetch(kid):
            async with self._lock:  # one fetch at a time; the tasks that waited for it find its keys
                if self._must_fetch(kid):
                    await self._fetch_or_keep()
                    if kid not in self._keys:
                        self._missed = time.monotonic()
        return self._keys.get(kid)

    async def _fetch_or_keep(self) -> None:
        """Fetches the keys; while the issuer cannot be reached the keys fetched before stay in use, and it is
        asked again only after MISS_COOLDOWN, so requests do not queue behind a dead issuer.
        Raises IssuerUnreachable when there are no keys from before."""
        if self._failure is None or time.monotonic() - self._failure[0] >= MISS_COOLDOWN:
            try:
                await self._fetch()
                self._failure = None
                return
            except IssuerUnreachable as exc:
                logger.error("cannot fetch the signing keys of {}: {}", self._issuer, exc)
                self._failure = (time.monotonic(), str(exc))
        if not self._keys:
            raise IssuerUnreachable(self._failure[1])

    def _must_fetch(self, kid: str | None) -> bool:
        now = time.monotonic()
        if not self._fetched or now - self._fetched >= JWKS_MAX_AGE:
            return True
        return kid not in self._keys and now - self._missed >= MISS_COOLDOWN

    async def _fetch(self) -> None:
        try:
            with anyio.fail_after(self._total_seconds):
                async with httpx2.AsyncClient(timeout=FETCH_SECONDS, follow_redirects=False) as client:
                    url = self._jwks_url or await self._discover(client)
                    document = await _get_json(client, url)
        except TimeoutError:
            where = self._jwks_url or f"the metadata of {self._issuer}"
            raise IssuerUnreachable(f"{where} did not answer whole within {self._total_seconds:g} s") from None
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document.get("keys") or []:
            try:
                key = jwt.PyJWK.from_dict(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError) as exc:
                logger.info("a key of the issuer's JWKS is skipped: {}", exc)
                continue
            if key.algorithm_name not in ASYMMETRIC or entry.get("use", "sig") != "sig":
                continue  # a symmetric key would let anyone who has it sign: never trusted
            keys[entry.get("kid")] = key
        if len(keys) == 1:
            keys.setdefault(None, next(iter(keys.values())))
        self._jwks_url, self._keys, self._fetched = url, keys, time.monotonic()
        logger.info(
            "fetched {} signing keys of {} from {}", len([k for k in keys if k]) or len(keys), self._issuer, url
        )

    async def _discover(self, client: httpx2.AsyncClient) -> str:
        problems = []
        for url in _metadata_urls(self._issuer):
            try:
                metadata = await _get_json(client, url)
            except IssuerUnreachable as exc:
                problems.append(str(exc))
                continue
            if metadata.get("issuer") == self._issuer and isinstance(metadata.get("jwks_uri"), str):
                return str(metadata["jwks_uri"])
            problems.append(f"{url} names no jwks_uri for the issuer {self._issuer}")
        raise IssuerUnreachable("; ".join(problems) + ": set server.auth.jwksUrl")


class JwtVerifier(VerifierBase):
    def __init__(self, settings: JwtAuth, audience: str) -> None:
        self._issuer = settings.issuer
        self._audience = audience
        self._keys = IssuerKeys(settings.issuer, settings.jwks_url)
        self._verified: OrderedDict[str, AccessToken] = OrderedDict()

    async def check(self, token: str) -> AccessToken | Refusal:
        cache_key = hashlib.sha256(token.encode(errors="surrogateescape")).hexdigest()
        cached = self._verified.get(cache_key)
        if cached is not None and cached.expires_at is not None and cached.expires_at > time.time():
            return cached
        self._verified.pop(cache_key, None)
        checked = await self._verify(token)
        if isinstance(checked, AccessToken):
            self._verified[cache_key] = checked.model_copy(
                update={"expires_at": min(checked.expires_at or 0, int(time.time() + TOKEN_CACHE_SECONDS))}
            )
            while len(self._verified) > TOKEN_CACHE_SIZE:
                self._verified.popitem(last=False)
        return checked

    async def _verify(self, token: str) -> AccessToken | Refusal:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = await self._keys.key(kid if isinstance(kid, str) else None)
            if key is None:
                return Refusal(f"the token's signing key ({kid or 'no kid'}) is not one of the issuer's keys")
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[key.algorithm_name],  # the key's, never the token's own choice
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except IssuerUnreachable:
            return Refusal("the issuer's signing keys cannot be fetched right now; try again soon")
        except jwt.PyJWTError as exc:
            return Refusal(_reason(exc, self._audience))
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject or len(subject) > 255 or not subject.isprintable():
            return Refusal("the token's sub is not a printable name of at most 255 characters")
        client = claims.get("client_id") or claims.get("azp") or subject
        return AccessToken(
            token=token,
            client_id=str(client),
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self._audience,
            subject=subject,
            # The groups claim is read per request (server.access.groupsClaim may change): `bearer.who_of`.
            claims={"iss": claims["iss"], JWT_CLAIMS: claims},
        )


def _reason(exc: jwt.PyJWTError, audience: str) -> str:
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired: get a new one from the issuer"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet (nbf or iat in the future)"
    if isinstance(exc, jwt.InvalidAudienceError):
        return f"the token is not for this gateway: its aud must be {audience}"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "the token is from another issuer"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim} claim"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return "the token's algorithm is not its key's (only the issuer's asymmetric keys sign tokens)"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify with the issuer's key"
    return "the token is not a well-formed JWT"


def _scopes(claims: dict[str, Any]) -> list[str]:
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return scope.split()
    return [s for s in scope if isinstance(s, str)] if isinstance(scope, list) else []


def _metadata_urls(issuer: str) -> list[str]:
    """RFC 8414's (the well-known part inserted before the issuer's path), then OpenID Connect's."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]


async def _get_json(client: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    """Raises IssuerUnreachable: no answer, not 200, over MAX_DOCUMENT_BYTES, or not a JSON object."""
    try:
        async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise IssuerUnreachable(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
            if response.status_code != 200:
                raise IssuerUnreachable(f"{url} answered HTTP {response.status_code}")
    except httpx2.HTTPError as exc:
        raise IssuerUnreachable(f"{url} cannot be reached ({type(exc).__name__})") from None
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise IssuerUnreachable(f"{url} did not answer JSON") from None
    if not isinstance(document, dict):
        raise IssuerUnreachable(f"{url} did not answer a JSON object")
    return document
