"""One person's tokens for one backend in the vault (`VaultTokens`): what one replica stores another reads, a
refreshed token replaces the old one everywhere, a forced refresh survives a reload, dropping the tokens keeps
the client registration, and nobody else's slot sees them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from agentify.backends.connection import AuthRequired
from agentify.backends.oauth import quiet_expected_stops
from agentify.backends.principal_tokens import VaultTokens
from agentify.config import BackendConfig
from agentify.team.vault import FileStore, Vault

pytestmark = pytest.mark.anyio

KEY = "principal-tokens-test-key-0123456789abcdef"
SPEC = BackendConfig.model_validate(
    {"id": "gh", "url": "https://mcp.example.test/mcp", "auth": {"type": "oauth", "perPrincipal": True}}
)


def _token(access: str, scope: str = "read") -> OAuthToken:
    return OAuthToken(
        access_token=access, token_type="Bearer", expires_in=3600, refresh_token="RT-" + access, scope=scope
    )


async def test_what_one_replica_stores_another_reads_and_nobody_elses_slot_sees(tmp_path: Path) -> None:
    vault = Vault([KEY], FileStore(tmp_path / "vault"))
    told: list[str] = []
    one = VaultTokens(SPEC, "alice", vault, told.extend)
    await one.set_tokens(_token("AT-first-0123456789abcdef"))
    other_replica = VaultTokens(SPEC, "alice", Vault([KEY], FileStore(tmp_path / "vault")))
    assert (await other_replica.get_tokens()) == _token("AT-first-0123456789abcdef")
    assert await VaultTokens(SPEC, "bob", vault).get_tokens() is None
    assert "AT-first-0123456789abcdef" in told  # every sink masks it from now on
    stamp = one.stamp()
    await other_replica.set_tokens(_token("AT-refreshed-0123456789abcdef"))
    assert (await one.get_tokens()) == _token("AT-refreshed-0123456789abcdef")
    assert one.stamp() != stamp  # the session's provider takes the new tokens on its next request
    for path in (tmp_path / "vault").iterdir():
        assert b"AT-" not in path.read_bytes()


async def test_a_forced_refresh_survives_a_reload_until_new_tokens_come(tmp_path: Path) -> None:
    tokens = VaultTokens(SPEC, "alice", Vault([KEY], FileStore(tmp_path / "vault")))
    await tokens.set_tokens(_token("AT-first-0123456789abcdef"))
    assert tokens.expire()
    await tokens.get_tokens()  # a new session loads the vault's copy
    assert tokens.expires_at() == 1.0
    await tokens.set_tokens(_token("AT-second-0123456789abcdef"))
    expires = tokens.expires_at()
    assert expires is not None and expires > 1.0


async def test_dropping_the_tokens_keeps_the_client_and_a_wanted_scope_is_missing(tmp_path: Path) -> None:
    tokens = VaultTokens(SPEC, "alice", Vault([KEY], FileStore(tmp_path / "vault")))
    client = OAuthClientInformationFull(client_id="c-1", redirect_uris=[AnyUrl("https://gw.example/oauth/callback")])
    await tokens.set_client_info(client)
    await tokens.set_tokens(_token("AT-first-0123456789abcdef", scope="read"))
    tokens.set_wanted_scope("read admin")
    assert tokens.missing_scope() == {"admin"} and tokens.granted_scope() == "read"
    await tokens.drop_tokens()
    again = VaultTokens(SPEC, "alice", Vault([KEY], FileStore(tmp_path / "vault")))
    assert await again.get_tokens() is None
    info = await again.get_client_info()
    assert info is not None and info.client_id == "c-1"


def test_an_expected_stop_of_the_sdks_flow_is_info_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    quiet_expected_stops()
    quiet_expected_stops()  # once is enough, twice changes nothing
    sdk = logging.getLogger("mcp.client.auth.oauth2")
    assert len([f for f in sdk.filters if type(f).__name__ == "_ExpectedStop"]) == 1
    with caplog.at_level(logging.DEBUG, logger="mcp.client.auth.oauth2"):
        try:
            raise AuthRequired("the server asks for a new authorization")
        except AuthRequired:
            sdk.exception("OAuth flow error")
        try:
            raise ValueError("a real failure")
        except ValueError:
            sdk.exception("OAuth flow error")
    expected, real = caplog.records
    assert expected.levelno == logging.INFO and expected.exc_info is None
    assert expected.getMessage() == "OAuth flow stopped: the server asks for a new authorization"
    assert real.levelno == logging.ERROR and real.exc_info is not None
