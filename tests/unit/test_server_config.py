"""Config `server` (the team gateway): mistakes are named with their path and what to write instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentify.config import load_sources
from agentify.config.server import JwtAuth, TokensAuth
from agentify.errors import ConfigError


def resolve(tmp_path: Path, server: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    path = tmp_path / "agentify.json"
    path.write_text(json.dumps({"backends": [{"id": "fs", "command": "node"}], "server": server}))
    return load_sources(str(path), {}, env or {}).resolve()


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ({"limits": {"perPrincipal": "lots"}}, "'lots' is not a rate limit: write a count per unit"),
        ({"limits": {"perBackend": {"fs": "5/fortnight"}}}, "is not a rate limit"),
        ({"limits": {"perBackend": {"web": "5/minute"}}}, "server.limits.perBackend names 'web', which is no backend"),
        ({"limits": {"whenRedisDown": "maybe"}}, "server.limits.whenRedisDown"),
        ({"auth": {"type": "jwt", "issuer": "https://id.example.com"}}, "set server.publicUrl"),
        ({"auth": {"type": "jwt", "issuer": "id.example.com", "audience": "x"}}, "is not an http:// or https:// URL"),
        ({"auth": {"type": "tokens"}}, "server.auth.tokens.file"),
        ({"auth": {"type": "magic"}}, "server.auth"),
        ({"publicUrl": "agentify.example.com/mcp"}, "is not an http:// or https:// URL"),
        ({"redis": "http://127.0.0.1:6379"}, "is not a redis://, rediss:// or unix:// URL"),
        ({"drainSeconds": 0}, "server.drainSeconds"),
        ({"trustedProxies": ["haproxy"]}, "'haproxy' is not an IP address or network: write e.g. 127.0.0.1"),
        ({"trustedProxies": ["10.0.0.1/8"]}, "'10.0.0.1/8' is not an IP address or network"),
    ],
)
def test_a_bad_server_section_is_a_clear_error(tmp_path: Path, server: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve(tmp_path, server)
    assert says in str(error.value)


def test_the_tokens_file_resolves_against_the_config_and_redis_comes_from_the_environment(tmp_path: Path) -> None:
    config = resolve(
        tmp_path,
        {"auth": {"type": "tokens", "file": "team/tokens.json"}},
        {"AGENTIFY_REDIS_URL": "redis://:s3cret-pass@127.0.0.1:6379/0"},
    )
    assert isinstance(config.server.auth, TokensAuth)
    assert config.server.auth.file == str((tmp_path / "team/tokens.json").resolve())
    assert config.server.redis == "redis://:s3cret-pass@127.0.0.1:6379/0"
    assert "s3cret-pass" in config.secrets()  # masked in every sink


def test_a_jwt_audience_defaults_to_nothing_but_the_public_url(tmp_path: Path) -> None:
    config = resolve(
        tmp_path,
        {"publicUrl": "https://agentify.example.com/mcp", "auth": {"type": "jwt", "issuer": "https://id.example.com"}},
    )
    assert isinstance(config.server.auth, JwtAuth)
    assert config.server.auth.audience is None and config.server.public_url == "https://agentify.example.com/mcp"
