"""The vault from the command line: a config with `perPrincipal` does not start without `AGENTIFY_VAULT_KEY`
(the message says how to make one); `agentify token remove NAME` and `agentify vault forget NAME` drop that
person's upstream tokens, and only theirs, from the state folder or from Redis."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentify.team.vault import FileStore, RedisStore, Vault
from tests.conftest import AGENTIFY, REPO, write_config
from tests.integration.team import add_token

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

KEY = "k" * 40
RECORD = {"tokens": {"access_token": "AT-upstream-secret-1234567890"}}


def per_principal_config(tmp_path: Path, **server: Any) -> Path:
    backend = {"id": "gh", "url": "http://127.0.0.1:9/mcp", "auth": {"type": "oauth", "perPrincipal": True}}
    return write_config(tmp_path, [backend], server={"auth": {"type": "tokens", "file": "tokens.json"}} | server)


async def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(120):
        return await anyio.run_process(
            [str(AGENTIFY), *args],
            check=False,
            stdin=subprocess.DEVNULL,
            env=os.environ | {"PYTHONPATH": str(REPO)} | env,
        )


async def test_per_principal_without_a_vault_key_does_not_start(tmp_path: Path) -> None:
    config = per_principal_config(tmp_path)
    env = {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache"), "AGENTIFY_HTTP_TOKEN": "t" * 32}
    env.pop("AGENTIFY_VAULT_KEY", None)
    done = await run("serve", "--transport", "http", "--port", "0", "--config", str(config), env=env)
    assert done.returncode == 2, done.stderr.decode()
    stderr = done.stderr.decode()
    assert "AGENTIFY_VAULT_KEY" in stderr and "secrets.token_hex(32)" in stderr
    assert "Traceback" not in stderr


async def test_token_remove_and_vault_forget_drop_that_persons_upstream_tokens(tmp_path: Path) -> None:
    config = per_principal_config(tmp_path)
    cache = tmp_path / "cache"
    env = {"AGENTIFY_CACHE_DIR": str(cache)}
    vault = Vault([KEY], FileStore(cache / "vault"))
    for person in ("alice", "bob", "carol"):
        await vault.save(person, "gh", RECORD)
    await add_token(tmp_path / "tokens.json", "alice")
    done = await run("token", "remove", "alice", "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert await vault.load("alice", "gh") is None
    assert await vault.load("bob", "gh") == RECORD
    done = await run("vault", "forget", "carol", "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert b"dropped 1" in done.stderr
    assert await vault.load("carol", "gh") is None
    assert await vault.load("bob", "gh") == RECORD


async def test_vault_forget_reaches_the_vault_in_redis(tmp_path: Path, redis: Any) -> None:
    config = per_principal_config(tmp_path, redis=redis.url)
    vault = Vault([KEY], RedisStore(redis.url))
    try:
        await vault.save("sub|123", "gh", RECORD)
        await vault.save("bob", "gh", RECORD)
        done = await run("vault", "forget", "sub|123", "--config", str(config), env={})
        assert done.returncode == 0, done.stderr.decode()
        assert await vault.load("sub|123", "gh") is None
        assert await vault.load("bob", "gh") == RECORD
    finally:
        await vault.aclose()
