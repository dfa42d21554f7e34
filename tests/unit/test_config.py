from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentify.config import load_sources
from agentify.errors import ConfigError


def write(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "agentify.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_precedence_is_flags_then_env_then_init_options_then_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"logLevel": "error", "planner": {"apiKey": "file-key", "model": "file-model"}})
    env = {"AGENTIFY_LOG_LEVEL": "warning", "OPENAI_API_KEY": "env-key"}
    sources = load_sources(path, {"logLevel": "debug"}, env)
    config = sources.resolve({"logLevel": "info", "OPENAI_API_KEY": "init-key"})
    assert config.log_level == "DEBUG"
    assert config.planner.api_key == "env-key"
    assert config.planner.model == "file-model"
    assert load_sources(path, {}, {}).resolve({"OPENAI_API_KEY": "init-key"}).planner.api_key == "init-key"
    assert load_sources(path, {}, {"AGENTIFY_MODEL": "m2"}).resolve().planner.model == "m2"


def test_mcp_servers_map_becomes_backends_and_disabled_is_respected(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"mcpServers": {"a": {"command": "x", "args": ["1"]}, "b": {"command": "y", "disabled": True}}}
    )
    config = load_sources(path, {}, {}).resolve()
    assert [(b.id, b.command, b.args, b.enabled) for b in config.backends] == [
        ("a", "x", ["1"], True),
        ("b", "y", [], False),
    ]
    assert config.backends[0].cwd == str(tmp_path.resolve())


def test_remote_mcp_servers_in_the_spellings_of_cursor_vscode_claude_code_and_windsurf(tmp_path: Path) -> None:
    servers = {
        "cursor": {"url": "https://example.test/mcp", "headers": {"X-Team": "${TEAM}"}},
        "vscode": {"type": "http", "url": "https://example.test/mcp"},
        "claude": {"type": "streamable-http", "url": "https://example.test/mcp"},
        "legacy": {"type": "sse", "url": "https://example.test/events"},
        "windsurf": {"serverUrl": "https://example.test/sse", "disabled": True},
        "local": {"command": "x"},
    }
    config = load_sources(write(tmp_path, {"mcpServers": servers}), {}, {"TEAM": "team-secret-42"}).resolve()
    seen = {b.id: (b.url, b.transport, b.headers, b.enabled) for b in config.backends}
    assert seen == {
        "cursor": ("https://example.test/mcp", None, {"X-Team": "team-secret-42"}, True),
        "vscode": ("https://example.test/mcp", "streamable-http", {}, True),
        "claude": ("https://example.test/mcp", "streamable-http", {}, True),
        "legacy": ("https://example.test/events", "sse", {}, True),
        "windsurf": ("https://example.test/sse", None, {}, False),
        "local": (None, None, {}, True),
    }
    assert "team-secret-42" in config.secrets() and "team-secret-42" in config.credential_secrets()


def test_a_server_with_neither_command_nor_url_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither command"):
        load_sources(write(tmp_path, {"mcpServers": {"odd": {"args": ["x"]}}}), {}, {})
    path = write(tmp_path, {"backends": [{"id": "both", "command": "x", "url": "http://127.0.0.1:1/mcp"}]})
    with pytest.raises(ConfigError, match="exactly one of command"):
        load_sources(path, {}, {}).resolve()
    path = write(tmp_path, {"backends": [{"id": "ftp", "url": "ftp://127.0.0.1/mcp"}]})
    with pytest.raises(ConfigError, match="not an http"):
        load_sources(path, {}, {}).resolve()


def test_bearer_token_url_password_and_query_token_are_secrets_and_masked_in_the_url(tmp_path: Path) -> None:
    backend = {
        "id": "r",
        "url": "https://user:pa55word-x@example.test/mcp?api_key=q-token-123&team=blue",
        "auth": {"type": "bearer", "token": "bearer-token-abc"},
    }
    config = load_sources(write(tmp_path, {"backends": [backend]}), {}, {}).resolve()
    assert {"pa55word-x", "q-token-123", "bearer-token-abc"} <= set(config.credential_secrets())
    shown = config.backends[0].where()
    assert shown == "https://[REDACTED]@example.test/mcp?api_key=[REDACTED]&team=blue"


def test_variables_expand_with_defaults_and_missing_ones_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, {"backends": [{"id": "a", "command": "${CMD}", "args": ["${ARG:-fallback}"]}]})
    config = load_sources(path, {}, {"CMD": "node"}).resolve()
    assert config.backends[0].command == "node" and config.backends[0].args == ["fallback"]
    with pytest.raises(ConfigError, match=r"config\.backends\.0\.command uses \$\{CMD\}"):
        load_sources(path, {}, {})


def test_init_options_backends_replace_the_file_list(tmp_path: Path) -> None:
    path = write(tmp_path, {"backends": [{"id": "a", "command": "x"}]})
    config = load_sources(path, {}, {}).resolve({"backends": {"b": {"command": "y"}}})
    assert [b.id for b in config.backends] == ["b"]


def test_credential_secrets_skip_plain_env_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "backends": [
                {
                    "id": "a",
                    "command": "x",
                    "env": {"NODE_ENV": "production", "GH_TOKEN": "ghp_1", "X": "abc123def456ghi789"},
                }
            ]
        },
    )
    config = load_sources(path, {}, {"OPENAI_API_KEY": "sk-1"}).resolve()
    assert set(config.secrets()) == {"sk-1", "production", "ghp_1", "abc123def456ghi789"}
    assert set(config.credential_secrets()) == {"sk-1", "ghp_1", "abc123def456ghi789"}


def test_invalid_values_name_their_field(tmp_path: Path) -> None:
    path = write(tmp_path, {"backends": [{"id": "ok", "command": "x", "tools": {"allow": "read"}}], "debugPort": 70000})
    with pytest.raises(ConfigError) as info:
        load_sources(path, {}, {}).resolve()
    assert "backends.0.tools.allow" in str(info.value) and "debugPort" in str(info.value)
