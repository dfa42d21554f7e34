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
    assert "team-secret-42" in config.secrets()


def test_a_server_with_neither_command_nor_url_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither command"):
        load_sources(write(tmp_path, {"mcpServers": {"odd": {"args": ["x"]}}}), {}, {})
    path = write(tmp_path, {"backends": [{"id": "both", "command": "x", "url": "http://127.0.0.1:1/mcp"}]})
    with pytest.raises(ConfigError, match="exactly one of command"):
        load_sources(path, {}, {}).resolve()
    path = write(tmp_path, {"backends": [{"id": "ftp", "url": "ftp://127.0.0.1/mcp"}]})
    with pytest.raises(ConfigError, match="not an http"):
        load_sources(path, {}, {}).resolve()


def test_a_url_with_a_user_or_password_is_refused_naming_the_fix(tmp_path: Path) -> None:
    """httpx would send them as Basic auth by itself; the error never shows the password."""
    for url in ("https://user:pa55word-x@example.test/mcp", "https://user@example.test/mcp"):
        path = write(tmp_path, {"backends": [{"id": "r", "url": url}]})
        with pytest.raises(ConfigError, match=r"holds a user name or password.*\"headers\"") as raised:
            load_sources(path, {}, {}).resolve()
        assert "pa55word-x" not in str(raised.value) and "[REDACTED]@example.test" in str(raised.value)


def test_bearer_token_and_query_token_are_secrets_and_masked_in_the_url(tmp_path: Path) -> None:
    backend = {
        "id": "r",
        "url": "https://example.test/mcp?api_key=q-token-123&team=blue",
        "auth": {"type": "bearer", "token": "bearer-token-abc"},
    }
    header = {
        "id": "h",
        "url": "https://example.test/mcp",
        "headers": {"Authorization": "Bearer ghp_plain", "X-Team": "a b"},
    }
    config = load_sources(write(tmp_path, {"backends": [backend, header]}), {}, {}).resolve()
    assert {"q-token-123", "bearer-token-abc", "Bearer ghp_plain", "ghp_plain"} <= set(config.secrets())
    assert "b" not in config.secrets() and "a b" in config.secrets()  # no scheme word: the value whole
    shown = config.backends[0].where()
    assert shown == "https://example.test/mcp?api_key=[REDACTED]&team=blue"


def test_variables_expand_with_defaults_and_missing_ones_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, {"backends": [{"id": "a", "command": "${CMD}", "args": ["${ARG:-fallback}"]}]})
    config = load_sources(path, {}, {"CMD": "node"}).resolve()
    assert config.backends[0].command == "node" and config.backends[0].args == ["fallback"]
    with pytest.raises(ConfigError, match=r"config\.planner\.model uses \$\{MODEL\}"):
        load_sources(write(tmp_path, {"planner": {"model": "${MODEL}"}}), {}, {})


def test_a_variable_missing_in_one_backend_fails_that_backend_only(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "backends": [{"id": "a", "command": "${CMD}"}, {"id": "b", "command": "node"}],
            "mcpServers": {
                "gh": {"command": "npx", "env": {"TOKEN": "${GH_TOKEN}", "OTHER": "${SET}"}},
                "remote": {"url": "${REMOTE_URL}"},
                "vs": {"command": "npx", "env": {"KEY": "${input:key}"}},
            },
        },
    )
    config = load_sources(path, {}, {"SET": "set-value-1"}).resolve()
    backends = {b.id: b for b in config.backends}
    assert list(backends) == ["a", "b", "gh", "remote", "vs"]
    assert backends["b"].problem is None and backends["b"].command == "node"
    assert backends["a"].problem is not None and "config.backends.0.command uses ${CMD}" in backends["a"].problem
    assert "environment variable GH_TOKEN is not set" in (backends["gh"].problem or "")
    assert backends["gh"].env == {"TOKEN": "", "OTHER": "set-value-1"}  # what was set is still a secret
    assert "set-value-1" in config.secrets()
    assert "config.mcpServers.remote.url uses ${REMOTE_URL}" in (backends["remote"].problem or "")
    assert "${input:key}" in (backends["vs"].problem or "")


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


def config_error(tmp_path: Path, data: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        load_sources(write(tmp_path, data), {}, {}).resolve()
    return str(info.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"backend": []}, 'unknown key "backend" (did you mean "backends"?)'),
        ({"plannr": {}}, 'unknown key "plannr" (did you mean "planner"?)'),
        ({"debugPrt": 9000}, 'unknown key "debugPrt" (did you mean "debugPort"?)'),
        ({"LogLevel": "info"}, 'unknown key "LogLevel" (did you mean "logLevel"?)'),
        ({"planner": {"modle": "m"}}, 'unknown key "planner.modle" (did you mean "model"?)'),
        ({"otel": {"captureContents": True}}, 'unknown key "otel.captureContents" (did you mean "captureContent"?)'),
        (
            {"backends": [{"id": "a", "command": "x", "timeout": 5}]},
            'unknown key "backends.0.timeout" (did you mean "timeoutSeconds"?)',
        ),
        (
            {"backends": [{"id": "a", "command": "x", "tools": {"alow": []}}]},
            'unknown key "backends.0.tools.alow" (did you mean "allow"?)',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "disabeld": True}}},
            'unknown key "mcpServers.a.disabeld" (did you mean "disabled"?)',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "tools": {"deny": [], "confirn": []}}}},
            'unknown key "backends.0.tools.confirn" (did you mean "confirm"?)',
        ),
        ({"zzz": 1}, 'unknown key "zzz" (valid here: backends, confirmTimeoutSeconds, debugHost, debugPort, '),
    ],
    ids=[
        "backend",
        "plannr",
        "debugPrt",
        "case",
        "planner",
        "otel",
        "entry",
        "tools",
        "mcp-servers",
        "mcp-tools",
        "far",
    ],
)
def test_an_unknown_key_is_an_error_naming_it_and_the_closest_valid_key(
    tmp_path: Path, data: dict[str, object], expected: str
) -> None:
    assert expected in config_error(tmp_path, data)


def test_every_unknown_key_is_reported_at_once(tmp_path: Path) -> None:
    message = config_error(tmp_path, {"plannr": {}, "debugPrt": 1, "planner": {"modle": "m"}})
    assert all(key in message for key in ('"plannr"', '"debugPrt"', '"planner.modle"'))


def test_unknown_keys_in_initialization_options_backends_are_named(tmp_path: Path) -> None:
    sources = load_sources(write(tmp_path, {}), {}, {})
    with pytest.raises(ConfigError, match=r'unknown key "backends\.0\.comand" \(did you mean "command"\?\)'):
        sources.resolve({"backends": [{"id": "a", "comand": "x"}]})


def test_comment_keys_are_allowed_at_every_level(tmp_path: Path) -> None:
    data = {
        "$comment": "top",
        "planner": {"$comment": "planner", "provider": "offline"},
        "backends": [
            {
                "$comment": "entry",
                "id": "a",
                "command": "x",
                "env": {"$comment": "env", "TOKEN": "t"},
                "tools": {"$comment": "tools", "deny": ["rm"]},
            }
        ],
        "mcpServers": {"$comment": "servers", "b": {"$comment": "entry", "command": "y"}},
    }
    config = load_sources(write(tmp_path, data), {}, {}).resolve()
    assert [b.id for b in config.backends] == ["a", "b"]
    assert config.backends[0].env == {"TOKEN": "t"}  # a comment never becomes an environment variable
    assert config.backends[0].tools.deny == ["rm"]


def test_other_clients_mcp_server_spellings_are_not_unknown(tmp_path: Path) -> None:
    servers = {
        "cursor": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer t"}},
        "vscode": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {}},
        "windsurf": {"serverUrl": "http://127.0.0.1:1/sse"},
        "claude": {"type": "stdio", "command": "x", "args": [], "env": {}},
    }
    config = load_sources(write(tmp_path, {"mcpServers": servers}), {}, {}).resolve()
    assert "claude" in [b.id for b in config.backends]


def test_mcp_server_entries_keep_every_backend_setting(tmp_path: Path) -> None:
    entry = {"command": "x", "allowDestructive": True, "tools": {"confirm": ["rm"]}, "timeoutSeconds": 5}
    backend = load_sources(write(tmp_path, {"mcpServers": {"a": entry}}), {}, {}).resolve().backends[0]
    assert (backend.allow_destructive, backend.tools.confirm, backend.timeout_seconds) == (True, ["rm"], 5)


def test_every_key_of_the_models_is_accepted_in_both_spellings(tmp_path: Path) -> None:
    """The valid keys are the models' own: whatever a model gains is accepted without a list to update."""
    from agentify.config import BackendConfig, Config

    full = Config(backends=[BackendConfig(id="a", command="x")])
    for by_alias in (True, False):
        data = full.model_dump(by_alias=by_alias, mode="json")
        assert load_sources(write(tmp_path, data), {}, {}).resolve().backends[0].id == "a"


def test_a_bad_environment_value_names_its_variable(tmp_path: Path) -> None:
    path = write(tmp_path, {})
    with pytest.raises(ConfigError, match=r"debugPort \(from AGENTIFY_DEBUG_PORT\): Input should be a valid integer"):
        load_sources(path, {}, {"AGENTIFY_DEBUG_PORT": "abc"}).resolve()
    with pytest.raises(ConfigError, match=r"planner\.provider \(from AGENTIFY_PLANNER\)"):
        load_sources(path, {}, {"AGENTIFY_PLANNER": "magic"}).resolve()
    with pytest.raises(ConfigError, match=r"planner\.shortlist \(from the command line\)"):
        load_sources(path, {"planner": {"shortlist": 0}}, {}).resolve()


def test_a_backend_protocol_is_one_of_three_and_anything_else_names_the_choices(tmp_path: Path) -> None:
    pinned = load_sources(
        write(tmp_path, {"backends": [{"id": "a", "command": "x", "protocol": "2025-11-25"}]}), {}, {}
    )
    assert pinned.resolve().backends[0].protocol == "2025-11-25"
    message = config_error(tmp_path, {"backends": [{"id": "a", "command": "x", "protocol": "2026"}]})
    assert "backends.0.protocol" in message
    assert all(choice in message for choice in ("'auto'", "'2025-11-25'", "'2026-07-28'")), message


def test_resources_and_prompts_filters_sit_beside_tools(tmp_path: Path) -> None:
    backend = {"id": "a", "command": "x", "resources": {"deny": ["*.html"]}, "prompts": {"allow": ["greet"]}}
    config = load_sources(write(tmp_path, {"backends": [backend]}), {}, {}).resolve(None)
    [spec] = config.backends
    assert not spec.resources.permits("arbigent://runs/1/report.html") and spec.prompts.permits("greet")
    with pytest.raises(ConfigError, match=r'unknown key "backends\.0\.prompts\.confirm"'):
        load_sources(write(tmp_path, {"backends": [backend | {"prompts": {"confirm": []}}]}), {}, {}).resolve(None)


def test_a_persons_own_secret_is_named_in_env_only_and_with_a_valid_name(tmp_path: Path) -> None:
    ok = {"id": "gh", "command": "x", "env": {"GITHUB_TOKEN": "${person:GH_PAT}", "B": "Bearer ${person:OTHER}"}}
    backend = load_sources(write(tmp_path, {"backends": [ok]}), {}, {}).resolve().backends[0]
    assert backend.personal_secrets == ("GH_PAT", "OTHER")
    for wrong, message in (
        ({"env": {"T": "${person:1x}"}}, r"env T names a person's secret '1x', which is not a valid name"),
        ({"env": {"T": "${person:}"}}, r"env T names a person's secret '', which is not a valid name"),
        ({"env": {"T": "${person:GH_PAT"}}, r"env T has a \$\{person: that no \} closes after a name"),
        ({"env": {"T": "${person:" + "A" * 200 + "}"}}, r"env T has a \$\{person: that no \} closes"),
        ({"args": ["--token", "${person:T}"]}, r"is taken in env values only"),
    ):
        path = write(tmp_path, {"backends": [{"id": "gh", "command": "x"} | wrong]})
        with pytest.raises(ConfigError, match=message):
            load_sources(path, {}, {}).resolve()
    path = write(tmp_path, {"backends": [{"id": "many", "command": "x", "maxSessions": 0}]})
    with pytest.raises(ConfigError, match="maxSessions"):
        load_sources(path, {}, {}).resolve()
    path = write(tmp_path, {"backends": [{"id": "many", "command": "x", "maxPeople": 0}]})
    with pytest.raises(ConfigError, match="maxPeople"):
        load_sources(path, {}, {}).resolve()


def test_max_people_is_refused_on_a_backend_nobody_runs_as_themselves(tmp_path: Path) -> None:
    for backend in (
        {"id": "plain", "command": "x", "env": {"T": "shared"}, "maxPeople": 4},
        {"id": "shared", "url": "http://127.0.0.1:1/mcp", "auth": {"type": "oauth"}, "maxPeople": 4},
    ):
        path = write(tmp_path, {"backends": [backend]})
        with pytest.raises(ConfigError, match="maxPeople applies only to a backend run as each person"):
            load_sources(path, {}, {}).resolve()
    for backend in (
        {"id": "pat", "command": "x", "env": {"T": "${person:PAT}"}, "maxPeople": 4},
        {"id": "own", "url": "http://127.0.0.1:1/mcp", "auth": {"type": "oauth", "perPrincipal": True}, "maxPeople": 4},
    ):
        assert load_sources(write(tmp_path, {"backends": [backend]}), {}, {}).resolve().backends[0].max_people == 4
