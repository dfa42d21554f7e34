"""Config `server`: how `serve --transport http` serves a team (DESIGN.md, "Team gateway").

Who the clients are (`auth`), the URL they use (`publicUrl`), the rate limits and where their counts
live (`limits`, `redis`), how long a SIGTERM waits for calls in flight (`drainSeconds`), which
peers are proxies whose `X-Forwarded-For` names the client (`trustedProxies`), where the audit
chain is written (`audit`), and what each principal may use (`access`, DESIGN.md "Who may do what").
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from agentify.config.base import Model
from agentify.security.credentials import mask_url, url_secrets

DRAIN_SECONDS = 30.0
AUDIT_MAX_BYTES = 100 * 1024 * 1024
AUDIT_KEEP = 10


class SharedTokenAuth(Model):
    """One bearer token for everyone: `AGENTIFY_HTTP_TOKEN`, else a random one shown at start."""

    type: Literal["token"] = "token"


class TokensAuth(Model):
    """A token per person: a file of their names and the sha256 of their tokens (`agentify token add`)."""

    type: Literal["tokens"]
    file: str = Field(min_length=1, description="The tokens file, relative to the config file.")
    required_scopes: list[str] = Field(
        default_factory=list, description="Scopes every token must carry (`agentify token add --scope`); else 403."
    )


class JwtAuth(Model):
    """An OAuth 2.1 resource server: JWTs signed by the issuer's keys (its JWKS)."""

    type: Literal["jwt"]
    issuer: str = Field(min_length=1)
    audience: str | None = Field(default=None, description="Default: server.publicUrl.")
    jwks_url: str | None = Field(default=None, description="Default: found by the issuer's metadata (discovery).")
    required_scopes: list[str] = Field(default_factory=list)

    @field_validator("issuer", "jwks_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
            raise ValueError(f"{mask_url(value)!r} is not an http:// or https:// URL")
        return value


PRINCIPAL_PREFIXES = ("group:", "scope:")
_PATTERN = re.compile(r"[A-Za-z0-9_*?.-]{1,200}")


class AccessRule(Model):
    """Who (`principals`) may use which backends and tools (`allow`), and which not (`deny`)."""

    principals: list[str] = Field(
        min_length=1,
        description='A principal\'s own name, "group:<name>", "scope:<name>" or "*" (everyone).',
    )
    allow: list[str] = Field(
        default_factory=list,
        description='Backend ids (all they offer) or tools as the gateway names them ("fs__read_*"); * globs.',
    )
    deny: list[str] = Field(default_factory=list, description="As allow; a deny beats every allow.")

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for principal in value:
            kind, _, name = principal.partition(":")
            named = bool(name) or f"{kind}:" not in PRINCIPAL_PREFIXES
            if not named or not principal.strip() or principal != principal.strip():
                raise ValueError(
                    f"{principal!r} names no principal: write a name (alice), group:<name>, scope:<name> or *"
                )
        return value

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not _PATTERN.fullmatch(pattern):
                raise ValueError(
                    f"{pattern[:80]!r} is not a backend id or gateway tool name: use letters, digits, _ - . and "
                    'the globs * and ? (e.g. "filesystem" or "filesystem__read_*")'
                )
        return value


class AccessConfig(Model):
    groups_claim: str = Field(
        default="groups",
        min_length=1,
        description="The JWT claim that lists a principal's groups (a list, or a space-separated string).",
    )
    rules: list[AccessRule] = Field(default_factory=list)
    policy_file: str | None = Field(
        default=None,
        min_length=1,
        description="Cedar policies for conditions on arguments (relative to the config file).",
    )


class LimitsConfig(Model):
    per_principal: str | None = Field(default=None, description='Per caller, e.g. "120/minute".')
    per_backend: dict[str, str] = Field(default_factory=dict, description='Per backend id, e.g. {"fs": "20/minute"}.')
    when_redis_down: Literal["allow", "refuse"] = Field(
        default="allow",
        description="When the shared counts cannot be reached: allow calls uncounted (fail open), or refuse "
        "them as rate_limited (fail closed).",
    )

    @field_validator("per_principal")
    @classmethod
    def _one_limit(cls, value: str | None) -> str | None:
        return None if value is None else _checked_limit(value)

    @field_validator("per_backend")
    @classmethod
    def _limits_per_backend(cls, value: dict[str, str]) -> dict[str, str]:
        return {backend: _checked_limit(limit) for backend, limit in value.items()}

    @property
    def any(self) -> bool:
        return self.per_principal is not None or bool(self.per_backend)


class AuditConfig(Model):
    """The audit chain (team/audit.py): one JSON line per operation a principal asked for."""

    file: str = Field(
        min_length=1,
        description="The JSON Lines file, relative to the config file; {replica} in it is the replica's id "
        "(AGENTIFY_REPLICA_ID, else the host name), so that replicas sharing a folder each write their own.",
    )
    max_bytes: int = Field(
        default=AUDIT_MAX_BYTES, ge=4096, description="Size at which the file is rotated (renamed FILE.1, ...)."
    )
    keep: int = Field(default=AUDIT_KEEP, ge=0, le=1000, description="How many rotated files are kept.")


class ServerConfig(Model):
    auth: SharedTokenAuth | TokensAuth | JwtAuth = Field(default_factory=SharedTokenAuth, discriminator="type")
    public_url: str | None = Field(
        default=None, description="The MCP endpoint as clients reach it (behind a proxy), e.g. https://host/mcp."
    )
    redis: str | None = Field(default=None, repr=False, description="redis:// URL of the counts replicas share.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    access: AccessConfig | None = Field(
        default=None, description="Who may use what; unset: every principal may use everything."
    )
    drain_seconds: float = Field(
        default=DRAIN_SECONDS, gt=0, le=300, description="How long SIGTERM waits for calls in flight."
    )
    max_sessions_per_principal: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="The most open MCP sessions one principal may hold on a replica; past it, its new session "
        "gets 429.",
    )
    session_opens_per_minute: int = Field(
        default=300,
        ge=1,
        description="The most MCP sessions one principal may open on a replica in a minute (with the shared "
        "token, the whole team is one principal).",
    )
    max_open_requests_per_principal: int = Field(
        default=500,
        ge=1,
        description="The most requests one principal may have open at once on a replica (streams and calls in "
        "flight); past it, 429.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or CIDRs of the proxies in front (e.g. HAProxy's): only from these peers is "
        "X-Forwarded-For believed, and the client is its right-most address that is not one of them.",
    )
    audit: AuditConfig | None = Field(default=None, description="The audit chain; unset: no audit.")

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            try:
                ipaddress.ip_network(network)
            except ValueError:
                raise ValueError(
                    f"{network!r} is not an IP address or network: write e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8"
                ) from None
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
            raise ValueError(f"{value!r} is not an http:// or https:// URL (the MCP endpoint, e.g. https://host/mcp)")
        return value

    @field_validator("redis")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"{mask_url(value)!r} is not a redis://, rediss:// or unix:// URL")
        return value

    @model_validator(mode="after")
    def _audience(self) -> ServerConfig:
        if isinstance(self.auth, JwtAuth) and not (self.auth.audience or self.public_url):
            raise ValueError(
                "auth type jwt needs the audience its tokens are issued for: set server.publicUrl (the URL clients "
                "use) or server.auth.audience"
            )
        return self

    def secret_values(self) -> list[str]:
        return url_secrets(self.redis)


def _checked_limit(value: str) -> str:
    from limits import parse_many

    try:
        parse_many(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a rate limit: write a count per unit, e.g. 120/minute, 10/second or 1000 per day"
        ) from None
    return value
