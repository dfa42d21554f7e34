"""One principal's tokens for one backend (`auth.perPrincipal`): the SDK's `TokenStorage`, kept in the vault.

It is `TokenFile` (the same record: tokens, expiry, client registration, the scope a step-up asked for), but the
record lives in the vault (`team/vault.py`, encrypted, shared by the replicas) instead of a file. The SDK reads
it through the async methods, which load it from the vault each time a session starts, so a token refreshed by
another replica (with a rotated refresh token) is the one used; every change is saved back at once. The
synchronous methods the connection uses between sessions read the copy loaded last.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from agentify.backends.oauth import SecretSink, TokenFile
from agentify.config import BackendConfig
from agentify.team.vault import Vault


class VaultTokens(TokenFile):
    def __init__(self, spec: BackendConfig, principal: str, vault: Vault, secrets: SecretSink | None = None) -> None:
        super().__init__(spec, secrets=secrets)
        self.principal = principal
        self._vault = vault
        self._data: dict[str, Any] = {}
        self._version = 0
        self._saved = json.dumps(self._data, sort_keys=True)
        self._expired = False  # `expire` asked for a refresh: the next session refreshes whatever it loads

    def _read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(json.dumps(self._data))  # a copy: callers change it before writing it
        self._tell(data)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self._tell(data)
        self._data = data
        self._version += 1

    def stamp(self) -> float:
        return float(self._version)

    def token_set(self) -> str:
        return f"{super().token_set()}#{self.principal}"

    def renew(self) -> None:
        """The session's provider loads the tokens again before its next request (it may hold older ones)."""
        self._version += 1

    def expire(self) -> bool:
        if not super().expire():
            return False
        self._expired = True  # kept beside the record: the next load brings the vault's copy back
        return True

    def expires_at(self) -> float | None:
        return 1.0 if self._expired else super().expires_at()

    async def load(self) -> dict[str, Any]:
        """The record as the vault holds it now (another replica may have changed it); raises VaultUnavailable."""
        record = await self._vault.load(self.principal, self._backend) or {}
        loaded = json.dumps(record, sort_keys=True)
        if loaded != json.dumps(self._data, sort_keys=True):
            self._data = record
            self._version += 1
            self._tell(record)
        self._saved = loaded
        return self._read()

    async def save(self) -> None:
        """Writes the record to the vault if it changed since it was loaded or saved; raises VaultUnavailable."""
        current = json.dumps(self._data, sort_keys=True)
        if current != self._saved:
            await self._vault.save(self.principal, self._backend, self._data)
            self._saved = current

    async def drop_tokens(self) -> None:
        """The tokens stop counting (refused by the server, or the person is asked again); the client stays."""
        await self.load()
        data = self._read()
        data.pop("tokens", None)
        data.pop("expiresAt", None)
        self._write(data)
        await self.save()

    async def get_tokens(self) -> OAuthToken | None:
        await self.load()
        return await super().get_tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._expired = False
        await super().set_tokens(tokens)
        await self.save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        await self.load()
        return await super().get_client_info()

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await super().set_client_info(client_info)
        await self.save()
