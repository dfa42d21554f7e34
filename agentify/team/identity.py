"""What a gateway needs to reach backends as each person (DESIGN.md, "Each person's own identity upstream"):
the vault of their tokens, the authorizations in progress, and the base URL of the gateway's own
`/oauth/...` routes (`publicUrl` without its last path segment; else where `serve` listens).

`Authorizations` is the part without the vault: the flows and the routes. A gateway whose remote backends use
OAuth with one shared identity has it too, so the person at a one-person gateway authorizes them (and steps
up their scope) from the IDE by the same URL, instead of at a terminal (`backends/shared_oauth.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from loguru import logger

from agentify.config import Config
from agentify.team.flows import Flows, MemoryKeys, RedisKeys
from agentify.team.vault import Vault, VaultUnavailable, store_for, vault_keys


@dataclass(eq=False)
class Authorizations:
    """The authorizations in progress and where the gateway's `/oauth/...` routes are reached."""

    flows: Flows
    base_url: str | None = None
    """Where `/oauth/start/...` and `/oauth/callback` are reached; set by the transport once it listens."""

    def start_url(self, flow_id: str) -> str:
        return f"{self._base()}/oauth/start/{flow_id}"

    def callback_url(self) -> str:
        return f"{self._base()}/oauth/callback"

    def _base(self) -> str:
        if self.base_url is None:
            raise RuntimeError("the gateway's /oauth routes are not served yet")
        return self.base_url.rstrip("/")

    async def aclose(self) -> None:
        await self.flows.aclose()


@dataclass(eq=False)
class Identity(Authorizations):
    """`Authorizations` with the vault of each person's tokens (`auth.perPrincipal`)."""

    vault: Vault = field(kw_only=True)
    keys: tuple[str, ...] = field(default=(), repr=False, kw_only=True)
    forgotten: list[Callable[[set[str]], None]] = field(default_factory=list, repr=False, kw_only=True)
    """Hear the principals whose upstream tokens were dropped (their sessions to backends end)."""

    async def forget(self, principals: set[str]) -> None:
        """Drops the upstream tokens of principals whose own tokens were removed (the tokens file changed)."""
        for listener in list(self.forgotten):
            listener(principals)
        for principal in principals:
            try:
                dropped = await self.vault.forget(principal)
            except VaultUnavailable as exc:
                logger.warning("the upstream tokens of a removed principal could not be dropped: {}", exc)
                continue
            if dropped:
                logger.info("dropped the upstream tokens of a removed principal ({} records)", dropped)

    async def aclose(self) -> None:
        await self.vault.aclose()
        await super().aclose()


def identity_for(config: Config, environ: Mapping[str, str] | None = None) -> Identity | None:
    """The vault and flows when a backend has `auth.perPrincipal`, else None.

    Raises:
        ConfigError: `AGENTIFY_VAULT_KEY` is missing or too short (`vault_keys`)."""
    environ = os.environ if environ is None else environ
    keys = vault_keys(environ, config)
    if keys is None:
        return None
    identity = Identity(_flows(config, environ), vault=Vault(keys, store_for(config)), keys=tuple(keys))
    if config.server.public_url:
        identity.base_url = routes_base(config.server.public_url)
    return identity


def authorizations_for(
    config: Config, identity: Identity | None, environ: Mapping[str, str] | None = None
) -> Authorizations | None:
    """`identity` when there is one; else, when a remote backend uses OAuth with one shared identity, the flows and
    routes its authorization by URL needs; else None (no `/oauth/...` routes are served)."""
    if identity is not None:
        return identity
    if not any(spec.oauth and spec.enabled for spec in config.backends):
        return None
    found = Authorizations(_flows(config, os.environ if environ is None else environ))
    if config.server.public_url:
        found.base_url = routes_base(config.server.public_url)
    return found


def _flows(config: Config, environ: Mapping[str, str]) -> Flows:
    redis = config.server.redis or environ.get("AGENTIFY_REDIS_URL")
    return Flows(RedisKeys(redis) if redis else MemoryKeys())


def routes_base(public_url: str) -> str:
    """`https://h/team/mcp` gives `https://h/team`: the routes sit beside the MCP endpoint."""
    parts = urlsplit(public_url)
    path = parts.path.rstrip("/").rpartition("/")[0]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
