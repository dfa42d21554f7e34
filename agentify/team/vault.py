"""The vault: each principal's own upstream credentials (per backend), encrypted at rest.

A record is a small JSON object (the OAuth tokens, their expiry, the granted and wanted scopes, the
client registration) sealed with AES-256-GCM under a key derived (HKDF-SHA256) from each key of
`AGENTIFY_VAULT_KEY` (comma-separated, each at least 32 bytes: the first seals, every one opens, so
keys rotate as `AGENTIFY_STATE_KEYS` do). The record's slot (who and which backend) is the
ciphertext's associated data, so a record copied into another person's slot does not open.

Where records live: in Redis with `server.redis` (every replica sees what a person authorized through
any of them), else in `vault/` of the state folder (platformdirs; a private directory, files 0600,
written atomically, never through a symbolic link: `_common.private_files`). Slots are named by
digests, so a principal's records can be dropped (`forget`) without any key, and the names of
people and backends are not written in the clear either.

A record that no key opens (the key was replaced) counts as none: the person is asked to authorize
again, and the event is logged once per process. Nothing here logs a record's content.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from loguru import logger

from agentify._common.dirs import user_dir
from agentify._common.errors import ConfigError
from agentify._common.private_files import private_dir, read_private, write_private
from agentify.config import Config, OAuthSettings
from agentify.team.redis_link import REDIS_SECONDS, redis_link
from agentify.team.shared_state import state_keys

VAULT_KEY_ENV = "AGENTIFY_VAULT_KEY"
MAKE_KEY = 'python3 -c "import secrets; print(secrets.token_hex(32))"'
_VERSION = b"v1"
_NONCE_BYTES = 12
_PREFIX = "agentify:vault:"


class VaultUnavailable(Exception):
    """The vault's store cannot be reached or written; the message says where and what to do."""


def per_principal_backends(config: Config) -> list[str]:
    """The ids of the backends whose credentials are per principal: OAuth tokens (`auth.perPrincipal`), or a
    person's own secrets in `env` (`${person:NAME}`)."""
    return [
        b.id
        for b in config.backends
        if (isinstance(b.auth, OAuthSettings) and b.auth.per_principal) or b.personal_secrets
    ]


def vault_keys(environ: Mapping[str, str], config: Config) -> list[str] | None:
    """The keys of `AGENTIFY_VAULT_KEY`, or None when no backend needs the vault.

    Raises:
        ConfigError: a backend has `perPrincipal` and the variable is unset, or a key is too short."""
    keys = state_keys(environ, VAULT_KEY_ENV)
    needing = per_principal_backends(config)
    if needing and keys is None:
        raise ConfigError(
            f"backend {needing[0]!r} keeps each person's tokens or secrets (auth.perPrincipal, or ${{person:NAME}} "
            "in env), which are encrypted with "
            f"{VAULT_KEY_ENV}, and it is not set. Make a key with {MAKE_KEY} and give every replica the same "
            f"{VAULT_KEY_ENV} (several comma-separated keys rotate: the first seals, every one opens)."
        )
    return keys if needing else None


class Sealer:
    """AES-GCM under the vault's keys; the first seals, any opens."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("the vault needs at least one key")
        self._keys = [_derived(key) for key in keys]

    def seal(self, plain: bytes, slot: str) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return _VERSION + nonce + self._keys[0].encrypt(nonce, plain, slot.encode())

    def open(self, blob: bytes, slot: str) -> bytes | None:
        """The plaintext, or None when the blob is malformed or no key opens it (or it belongs to another slot)."""
        if not blob.startswith(_VERSION) or len(blob) < len(_VERSION) + _NONCE_BYTES + 16:
            return None
        nonce, sealed = blob[len(_VERSION) : len(_VERSION) + _NONCE_BYTES], blob[len(_VERSION) + _NONCE_BYTES :]
        for key in self._keys:
            try:
                return key.decrypt(nonce, sealed, slot.encode())
            except InvalidTag:
                continue
        return None


def _derived(key: str) -> AESGCM:
    material = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"agentify vault v1").derive(key.encode())
    return AESGCM(material)


class VaultStore(Protocol):
    """Where sealed records live, by slot name. Raises VaultUnavailable when it cannot be reached."""

    async def get(self, slot: str) -> bytes | None: ...

    async def put(self, slot: str, blob: bytes) -> None: ...

    async def drop(self, prefix: str) -> int:
        """Removes every record whose slot starts with `prefix`; how many there were."""
        ...

    async def aclose(self) -> None: ...


class FileStore:
    """One 0600 file per record in a private directory (`vault/` of the state folder by default); the file
    system is used from a worker thread."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or user_dir("cache") / "vault"

    async def get(self, slot: str) -> bytes | None:
        try:
            return await anyio.to_thread.run_sync(read_private, self.directory, slot)
        except OSError as exc:
            raise VaultUnavailable(f"the vault in {self.directory} cannot be read: {exc.strerror or exc}") from None

    async def put(self, slot: str, blob: bytes) -> None:
        try:
            await anyio.to_thread.run_sync(write_private, self.directory, slot, blob)
        except OSError as exc:
            raise VaultUnavailable(f"the vault in {self.directory} cannot be written: {exc.strerror or exc}") from None

    async def drop(self, prefix: str) -> int:
        try:
            return await anyio.to_thread.run_sync(self._drop, prefix)
        except OSError as exc:
            raise VaultUnavailable(f"the vault in {self.directory} cannot be changed: {exc.strerror or exc}") from None

    def _drop(self, prefix: str) -> int:
        if not os.path.lexists(self.directory):
            return 0
        private_dir(self.directory)  # a symbolic link or another user's directory is refused
        names = [name for name in os.listdir(self.directory) if name.startswith(prefix)]
        for name in names:
            try:
                os.unlink(self.directory / name)  # unlink removes a link itself, never what it points to
            except FileNotFoundError:
                pass
        return len(names)

    async def aclose(self) -> None:
        return None


class RedisStore:
    """Records as Redis keys `agentify:vault:<slot>`, shared by every replica."""

    def __init__(self, url: str) -> None:
        self._redis = redis_link(url)

    def _failed(self, exc: BaseException) -> VaultUnavailable:
        return VaultUnavailable(
            f"the vault in {self._redis.where} cannot be reached ({type(exc).__name__}); try again once Redis is back"
        )

    async def get(self, slot: str) -> bytes | None:
        try:
            with anyio.fail_after(REDIS_SECONDS):
                value = await self._redis.client.get(_PREFIX + slot)
        except self._redis.unreachable as exc:
            raise self._failed(exc) from None
        return value if isinstance(value, bytes) else None

    async def put(self, slot: str, blob: bytes) -> None:
        try:
            with anyio.fail_after(REDIS_SECONDS):
                await self._redis.client.set(_PREFIX + slot, blob)
        except self._redis.unreachable as exc:
            raise self._failed(exc) from None

    async def drop(self, prefix: str) -> int:
        client = self._redis.client
        try:
            with anyio.fail_after(REDIS_SECONDS * 5):
                keys = [key async for key in client.scan_iter(match=_PREFIX + prefix + "*", count=500)]
                if keys:
                    await client.delete(*keys)
        except self._redis.unreachable as exc:
            raise self._failed(exc) from None
        return len(keys)

    async def aclose(self) -> None:
        await self._redis.aclose()


def store_for(config: Config) -> VaultStore:
    """Redis with `server.redis` (or the replicas' `AGENTIFY_REDIS_URL`), else the state folder."""
    url = config.server.redis or os.environ.get("AGENTIFY_REDIS_URL")
    return RedisStore(url) if url else FileStore()


def principal_prefix(principal: str) -> str:
    return hashlib.sha256(b"principal\0" + principal.encode()).hexdigest()[:32] + "."


def slot_of(principal: str, backend: str) -> str:
    return principal_prefix(principal) + hashlib.sha256(b"backend\0" + backend.encode()).hexdigest()[:24]


class Vault:
    """Each principal's records, by backend. Raises VaultUnavailable where the store cannot be used."""

    def __init__(self, keys: list[str], store: VaultStore) -> None:
        self._sealer = Sealer(keys)
        self.store = store
        self._told_unopenable = False

    async def load(self, principal: str, backend: str) -> dict[str, Any] | None:
        """The record, or None when there is none, or it does not open with any key (then the person is asked
        to authorize again)."""
        slot = slot_of(principal, backend)
        blob = await self.store.get(slot)
        if blob is None:
            return None
        plain = self._sealer.open(blob, slot)
        if plain is None:
            if not self._told_unopenable:
                self._told_unopenable = True
                logger.warning(
                    "the vault holds tokens that none of the keys in {} opens (was the key replaced?): the people "
                    "they belong to are asked to authorize again. Keep the old key after the new one to rotate.",
                    VAULT_KEY_ENV,
                )
            return None
        try:
            record = json.loads(plain)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    async def save(self, principal: str, backend: str, record: dict[str, Any]) -> None:
        slot = slot_of(principal, backend)
        await self.store.put(slot, self._sealer.seal(json.dumps(record).encode(), slot))

    async def forget(self, principal: str, backend: str | None = None) -> int:
        """Drops the principal's records (one backend's, or all); how many there were."""
        return await self.store.drop(slot_of(principal, backend) if backend else principal_prefix(principal))

    async def aclose(self) -> None:
        await self.store.aclose()
