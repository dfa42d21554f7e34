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


def test_url_only_mcp_server_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, {"mcpServers": {"remote": {"url": "http://127.0.0.1:1/mcp"}, "a": {"command": "x"}}})
    assert [b.id for b in load_sources(path, {}, {}).resolve().backends] == ["a"]


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


def test_secrets_are_credentials_and_expanded_values_but_not_plain_env_values(tmp_path: Path) -> None:
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
    assert set(config.secrets()) == {"sk-1", "ghp_1", "abc123def456ghi789"}


def test_every_value_from_a_variable_is_a_secret_wherever_it_is_used(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "backends": [
                {"id": "a", "command": "x", "args": ["--token", "${GH_TOKEN}", "${HOME}/data", "--level=${LVL:-info}"]}
            ]
        },
    )
    config = load_sources(path, {}, {"GH_TOKEN": "plainword", "HOME": "/home/ada"}).resolve()
    assert config.secrets() == ["plainword"]  # HOME names a place; the default came from the file


def test_a_relative_trace_file_resolves_against_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = write(tmp_path / "conf", {"traceFile": "traces.jsonl"})
    assert load_sources(path, {}, {}).resolve().trace_file == str((tmp_path / "conf" / "traces.jsonl").resolve())


def test_invalid_values_name_their_field(tmp_path: Path) -> None:
    path = write(tmp_path, {"backends": [{"id": "ok", "command": "x", "tools": {"allow": "read"}}], "debugPort": 70000})
    with pytest.raises(ConfigError) as info:
        load_sources(path, {}, {}).resolve()
    assert "backends.0.tools.allow" in str(info.value) and "debugPort" in str(info.value)
