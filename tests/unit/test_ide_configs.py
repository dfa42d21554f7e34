"""Each IDE's MCP config, in the shape its documentation shows, loads as pasted (tests/fixtures/ide_configs)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger
from mcp_types import Tool, ToolAnnotations

from agentify._common.jsonc import strip as strip_jsonc
from agentify.config import Config, load_sources
from agentify.errors import ConfigError
from agentify.gateway.policy import confirmation_reason

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ide_configs"
ENV = {"GITHUB_TOKEN": "ghp_token_from_the_environment_123", "API_KEY": "key-from-env-456", "FIGMA_TOKEN": "figd_x"}


@pytest.fixture
def ides(tmp_path: Path) -> Path:
    """A copy of the fixtures, so paths resolve in a folder the test owns."""
    shutil.copytree(FIXTURES, tmp_path / "ides")
    return (tmp_path / "ides").resolve()


@pytest.fixture
def log() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message).rstrip("\n")), level="INFO", format="{message}")
    yield lines
    logger.remove(sink)


def load(path: Path, env: dict[str, str] | None = None) -> Config:
    return load_sources(str(path), {}, ENV if env is None else env).resolve()


def test_vscode_servers_with_comments_schema_env_workspace_folder_and_env_file(ides: Path, log: list[str]) -> None:
    config = load(ides / "vscode/.vscode/mcp.json")
    backends = {b.id: b for b in config.backends}
    assert list(backends) == ["memory", "files", "github"]
    workspace = ides / "vscode"
    files = backends["files"]
    assert files.args == [f"{workspace}/tools/server.js", "docs"]
    assert files.cwd == str(workspace)  # relative paths resolve in the workspace, not in .vscode/
    assert files.env == {
        "LOG_FORMAT": "json",
        "DB_PASSWORD": "from-the-env-file-hunter2",
        "GITHUB_TOKEN": ENV["GITHUB_TOKEN"],
    }
    assert backends["github"].transport == "streamable-http"
    assert backends["github"].headers == {"Authorization": f"Bearer {ENV['GITHUB_TOKEN']}"}
    assert ENV["GITHUB_TOKEN"] in config.secrets() and "from-the-env-file-hunter2" in config.secrets()
    assert [line for line in log if "ignored keys" in line] == [
        f"config file {ides}/vscode/.vscode/mcp.json: ignored keys that agentify does not use: servers.files.dev"
    ]


def test_an_unresolved_vscode_input_fails_its_server_with_a_message_that_names_it(ides: Path) -> None:
    (server,) = load(ides / "vscode-inputs/.vscode/mcp.json").backends
    assert re.search(r"\$\{input:perplexity-key\}.*only VS Code can ask.*\$\{env:NAME\}", server.problem or "")


def test_cursor_env_file_and_env_vars_with_paths_in_the_workspace(ides: Path) -> None:
    config = load(ides / "cursor/.cursor/mcp.json")
    local, remote = config.backends
    assert local.cwd == str(ides / "cursor")
    assert local.env == {"API_KEY": ENV["API_KEY"], "REGION": "eu-west-1"}  # env beats envFile
    assert remote.headers == {"API_KEY": ENV["API_KEY"]}


def test_cline_auto_approve_timeout_and_disabled(ides: Path) -> None:
    weather, github, old = load(ides / "cline/cline_mcp_settings.json").backends
    assert (weather.timeout_seconds, weather.enabled, weather.tools.auto_approve) == (60, True, ["get_forecast"])
    assert github.id == "github_com_modelcontextprotocol_servers_tree_main_src_github"  # a marketplace name
    assert old.enabled is False
    destructive = ToolAnnotations(destructive_hint=True)
    forecast = Tool(name="get_forecast", input_schema={}, annotations=destructive)
    assert confirmation_reason(weather, "get_forecast", forecast) is None
    delete = Tool(name="delete_city", input_schema={}, annotations=destructive)
    assert confirmation_reason(weather, "delete_city", delete)


def test_roo_always_allow_disabled_tools_and_cwd(ides: Path) -> None:
    (server,) = load(ides / "roo/.roo/mcp.json").backends
    assert server.tools.auto_approve == ["tool1", "tool2"]
    assert server.tools.deny == ["tool3"]
    assert server.timeout_seconds == 120
    assert server.cwd == str(ides / "roo/servers/local")


def test_windsurf_disabled_tools_and_server_url(ides: Path) -> None:
    github, figma = load(ides / "windsurf/mcp_config.json").backends
    assert github.tools.deny == ["delete_repository"]
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": ENV["GITHUB_TOKEN"]}
    assert figma.url == "https://mcp.figma.com/mcp"


def test_gemini_http_url_timeout_in_milliseconds_and_tool_lists(ides: Path, log: list[str]) -> None:
    python, http = load(ides / "gemini/.gemini/settings.json", ENV | {"DB_CONNECTION_STRING": "db://x"}).backends
    assert (python.timeout_seconds, python.tools.allow) == (15, ["safe_tool", "file_reader"])
    assert python.cwd == str(ides / "gemini/mcp-servers/python")
    assert (http.url, http.transport, http.timeout_seconds) == ("http://localhost:3000/mcp", "streamable-http", 5)
    assert http.tools.deny == ["dangerous_tool"]
    ignored = next(line for line in log if "ignored keys" in line)
    assert ignored.endswith("theme, mcpServers.pythonTools.trust")


@pytest.mark.parametrize("path", ["claude-desktop/claude_desktop_config.json", "claude-code/.mcp.json"])
def test_claude_configs_load(ides: Path, path: str) -> None:
    config = load(ides / path)
    assert config.backends and all(b.enabled for b in config.backends)


def test_agentify_own_keys_stay_strict_beside_a_foreign_map(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"comand": "x", "command": "y"}}, "plannr": {}}))
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert 'unknown key "mcpServers.a.comand" (did you mean "command"?)' in str(caught.value)
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "y"}}, "plannr": {}}))
    with pytest.raises(ConfigError, match='unknown key "plannr"'):
        load(path)
    path.write_text(json.dumps({"backends": [{"id": "a", "command": "y", "autoApprove": []}]}))
    with pytest.raises(ConfigError, match='unknown key "backends.0.autoApprove"'):
        load(path)


def test_a_missing_env_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    path = tmp_path / ".cursor" / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x", "envFile": ".env.local"}}}))
    with pytest.raises(ConfigError, match=rf"{tmp_path}/\.env\.local, which cannot be read"):
        load(path)


def test_jsonc_keeps_strings_and_positions() -> None:
    text = '{\n  // comment\n  "u": "http://x//y /* no */", /* c */ "a": [1, 2,],\n}'
    assert json.loads(strip_jsonc(text)) == {"u": "http://x//y /* no */", "a": [1, 2]}
    assert strip_jsonc(text).count("\n") == text.count("\n")
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(strip_jsonc('{\n  // c\n  "a": 1 "b": 2\n}'))
    assert caught.value.lineno == 3


def test_the_ides_own_agentify_entry_is_skipped_before_its_inputs_are_read(tmp_path: Path, log: list[str]) -> None:
    (tmp_path / ".vscode").mkdir()
    path = tmp_path / ".vscode" / "mcp.json"
    agentify = {"type": "stdio", "command": "/opt/agentify/.venv/bin/agentify", "args": ["serve", "--config", "x"]}
    runner = {"command": "agentify", "args": ["arbigent", "--project", "p.yaml"]}
    path.write_text(
        json.dumps(
            {
                "servers": {
                    "agentify": agentify | {"env": {"OPENAI_API_KEY": "${input:openai-key}"}},
                    "python-agentify": {"command": "python3", "args": ["-m", "agentify"]},
                    "runner": runner,
                },
                "inputs": [{"id": "openai-key", "type": "promptString", "password": True}],
            }
        )
    )
    assert [b.id for b in load(path).backends] == ["runner"]  # the arbigent runner is a backend like any other
    skipped = [line for line in log if "starts agentify itself: skipped" in line]
    assert len(skipped) == 2 and "'agentify'" in skipped[0] and "'python-agentify'" in skipped[1], skipped


def test_zed_context_servers_load_in_both_command_forms_and_its_other_settings_are_ignored(
    ides: Path, log: list[str]
) -> None:
    config = load(ides / "zed/settings.json")
    backends = {b.id: b for b in config.backends}
    assert list(backends) == ["local-files", "older-form"]
    assert (backends["local-files"].command, backends["local-files"].args) == ("node", ["tools/server.js", "docs"])
    assert backends["local-files"].env == {"LOG_LEVEL": "info"}
    older = backends["older-form"]
    assert (older.command, older.args) == ("npx", ["-y", "@modelcontextprotocol/server-github"])
    assert older.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": ENV["GITHUB_TOKEN"]}
    assert any("mcp-server-postgres" in line and "extension" in line for line in log), log
    ignored = next(line for line in log if "ignored keys" in line)
    assert "theme" in ignored and "languages" in ignored


def test_an_unknown_key_suggests_only_a_key_that_looks_like_it(tmp_path: Path) -> None:
    path = tmp_path / "agentify.json"
    path.write_text(json.dumps({"contextServers": {}}))
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert "maxContextChars" not in str(caught.value).split("valid here")[0], caught.value


def test_gemini_settings_expand_dollar_var_and_braced_var_in_url_headers_env_and_args(ides: Path) -> None:
    env = {"API_HOST": "api.example.org", "API_TOKEN": "tok-123", "TEAM": "blue", "API_KEY": "k-9", "HOME_DIR": "/h"}
    remote, local = load(ides / "gemini-vars/.gemini/settings.json", env).backends
    assert remote.url == "https://api.example.org/mcp"
    assert remote.headers == {"Authorization": "Bearer tok-123", "X-Team": "blue"}
    assert local.args == ["-m", "server", "--token", "tok-123"]
    assert local.env == {"API_KEY": "k-9", "HOME_DIR": "/h"}


def test_a_bare_dollar_stays_as_it_is_outside_gemini_files(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "sh", "args": ["-c", "echo $HOME"]}}}))
    (backend,) = load(path, {"HOME": "/home/me"}).backends
    assert backend.args == ["-c", "echo $HOME"]
