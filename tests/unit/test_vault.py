"""The vault: each principal's upstream tokens, sealed (no plaintext in the raw store, in a file or in Redis),
opened by any of the rotating keys, bound to its slot, dropped per principal, and required by perPrincipal."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agentify._common.errors import ConfigError
from agentify.config import Config
from agentify.team.vault import VAULT_KEY_ENV, FileStore, RedisStore, Vault, slot_of, vault_keys

pytestmark = pytest.mark.anyio

KEY_A = "a" * 16 + "0123456789abcdef0123"
KEY_B = "b" * 16 + "0123456789abcdef0123"
RECORD = {"tokens": {"access_token": "AT-alice-secret-1234567890", "refresh_token": "RT-alice-secret-0987654321"}}


def _per_principal_config() -> Config:
    return Config.model_validate(
        {"backends": [{"id": "gh", "url": "https://example.test/mcp", "auth": {"type": "oauth", "perPrincipal": True}}]}
    )


async def test_a_file_vault_holds_no_plaintext_and_opens_for_its_owner_only(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    vault = Vault([KEY_A], store)
    await vault.save("alice", "gh", RECORD)
    await vault.save("bob", "gh", {"tokens": {"access_token": "AT-bob-secret-1234567890"}})
    files = sorted((tmp_path / "vault").iterdir())
    assert len(files) == 2
    for path in files:
        raw = path.read_bytes()
        assert b"secret" not in raw and b"alice" not in raw and b"access_token" not in raw
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        assert "alice" not in path.name and "gh" not in path.name
    assert await vault.load("alice", "gh") == RECORD
    assert await vault.load("carol", "gh") is None


async def test_a_record_copied_into_another_slot_does_not_open(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    vault = Vault([KEY_A], store)
    await vault.save("alice", "gh", RECORD)
    blob = await store.get(slot_of("alice", "gh"))
    assert blob is not None
    await store.put(slot_of("mallory", "gh"), blob)
    assert await vault.load("mallory", "gh") is None


async def test_keys_rotate_the_first_seals_every_one_opens(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    await Vault([KEY_A], store).save("alice", "gh", RECORD)
    rotated = Vault([KEY_B, KEY_A], store)
    assert await rotated.load("alice", "gh") == RECORD
    await rotated.save("alice", "gh", RECORD)  # sealed again with the new key
    assert await Vault([KEY_B], store).load("alice", "gh") == RECORD
    assert await Vault([KEY_A], store).load("alice", "gh") is None


async def test_a_key_that_opens_nothing_counts_as_no_tokens(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    await Vault([KEY_A], store).save("alice", "gh", RECORD)
    other = Vault([KEY_B], store)
    assert await other.load("alice", "gh") is None
    assert await other.load("alice", "gh") is None  # asked again, not an error


async def test_forget_drops_one_principals_records_only(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    vault = Vault([KEY_A], store)
    await vault.save("alice", "gh", RECORD)
    await vault.save("alice", "jira", RECORD)
    await vault.save("bob", "gh", RECORD)
    assert await vault.forget("alice") == 2
    assert await vault.load("alice", "gh") is None and await vault.load("alice", "jira") is None
    assert await vault.load("bob", "gh") == RECORD
    assert await vault.forget("alice") == 0


async def test_a_symbolic_link_in_the_vault_is_not_followed(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "vault")
    vault = Vault([KEY_A], store)
    await vault.save("bob", "gh", RECORD)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not yours")
    slot = slot_of("alice", "gh")
    os.symlink(target, tmp_path / "vault" / slot)
    with pytest.raises(Exception, match="symbolic link"):
        await vault.load("alice", "gh")
    assert await vault.forget("alice") == 1
    assert target.read_bytes() == b"not yours"


async def test_a_redis_vault_is_shared_and_holds_no_plaintext(redis: Any) -> None:
    one, two = Vault([KEY_A], RedisStore(redis.url)), Vault([KEY_A], RedisStore(redis.url))
    try:
        await one.save("alice", "gh", RECORD)
        assert await two.load("alice", "gh") == RECORD
        raw = Redis.from_url(redis.url)
        keys = await raw.keys("*")
        assert len(keys) == 1
        value = await raw.get(keys[0])
        assert b"secret" not in value and b"alice" not in keys[0]
        await raw.aclose()
        assert await two.forget("alice") == 1
        assert await one.load("alice", "gh") is None
    finally:
        await one.aclose()
        await two.aclose()


def test_per_principal_without_a_vault_key_is_refused_with_how_to_make_one() -> None:
    with pytest.raises(ConfigError, match=f"{VAULT_KEY_ENV}.*secrets.token_hex"):
        vault_keys({}, _per_principal_config())
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        vault_keys({VAULT_KEY_ENV: "short"}, _per_principal_config())
    assert vault_keys({VAULT_KEY_ENV: f"{KEY_A},{KEY_B}"}, _per_principal_config()) == [KEY_A, KEY_B]
    assert vault_keys({}, Config.model_validate({"backends": []})) is None
    personal = Config.model_validate({"backends": [{"id": "gh", "command": "x", "env": {"T": "${person:PAT}"}}]})
    with pytest.raises(ConfigError, match=rf"backend 'gh' keeps each person's tokens or secrets.*{VAULT_KEY_ENV}"):
        vault_keys({}, personal)
