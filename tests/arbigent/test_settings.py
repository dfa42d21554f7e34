"""The --config file turned into `arbigent run` flags and child environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentify.arbigent.errors import ConfigError
from agentify.arbigent.settings import load_settings, stray_settings


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_keys_become_flags_and_the_run_section_overrides_the_top_level(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "ai-type: openai\nos: android\nrun:\n  os: ios\n  log-level: debug\n"))
    assert settings.argv() == ["--ai-type=openai", "--os=ios", "--log-level=debug"]


def test_api_keys_go_to_the_environment_and_never_into_argv(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "openai-api-key: key-one\nrun:\n  gemini-api-key: key-two\n"))
    assert settings.env == {"OPENAI_API_KEY": "key-one", "GEMINI_API_KEY": "key-two"}
    assert settings.argv() == []
    assert set(settings.secrets) == {"key-one", "key-two"}


def test_the_runners_own_options_are_dropped(tmp_path: Path) -> None:
    text = "project-file: other.yaml\ntags: smoke\nscenario-ids: a\ndry-run: true\nshard: 1/2\nos: web\n"
    settings = load_settings(write(tmp_path, text))
    assert settings.argv() == ["--os=web"]
    assert [key for key, _ in settings.ignored] == ["project-file", "tags", "scenario-ids", "dry-run", "shard"]


def test_a_log_level_that_hides_the_results_summary_is_dropped(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "log-level: warn\n"))
    assert settings.argv() == []
    assert settings.ignored[0][0] == "log-level"


def test_flags_variables_and_lists_are_rendered_like_the_settings_file(tmp_path: Path) -> None:
    text = "ai-api-logging: true\nvariables:\n  user: alice\n  pin: 1234\nios-device-ids: [a, b]\n"
    settings = load_settings(write(tmp_path, text))
    assert settings.argv() == ["--ai-api-logging", "--variables=user=alice,pin=1234", "--ios-device-ids=a,b"]


def test_logged_command_lines_show_no_value_from_the_config(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "openai-endpoint: https://private.example/v1\nai-api-logging: true\n"))
    assert settings.display_argv() == ["--openai-endpoint=<config>", "--ai-api-logging"]


def test_unknown_keys_are_passed_on_and_reported(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "device-id: emulator-5554\n"))
    assert settings.argv() == ["--device-id=emulator-5554"]
    assert settings.unknown == ("device-id",)


def test_sensitive_looking_values_are_secrets(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "ios-team-id: ABCDE12345\n"))
    assert settings.secrets == ("ABCDE12345",)


def test_an_environment_style_key_is_rejected_with_the_option_name_to_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'openai-api-key'"):
        load_settings(write(tmp_path, "OPENAI_API_KEY: x\n"))


def test_a_config_that_is_not_yaml_is_passed_as_an_argument_file(tmp_path: Path) -> None:
    path = write(tmp_path, "# arbigent options\n--ai-type=gemini --os web\n", "config.args")
    assert load_settings(path).argv() == [f"@{path.resolve()}"]


def test_an_argument_file_may_not_set_the_runners_own_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sets --tags"):
        load_settings(write(tmp_path, "--ai-type=openai\n--tags=smoke\n", "config.args"))


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.yaml")


def test_an_empty_config_file_means_no_options(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "")).argv() == []


def test_a_settings_file_in_the_working_directory_that_filters_runs_is_found(tmp_path: Path) -> None:
    (tmp_path / ".arbigent").mkdir()
    (tmp_path / ".arbigent" / "settings.local.yml").write_text("openai-api-key: k\nrun:\n  dry-run: true\n")
    problem = stray_settings(tmp_path)
    assert problem is not None
    assert "dry-run" in problem


def test_a_settings_file_with_only_keys_and_options_is_fine(tmp_path: Path) -> None:
    (tmp_path / ".arbigent").mkdir()
    (tmp_path / ".arbigent" / "settings.yml").write_text("openai-api-key: k\nos: android\n")
    assert stray_settings(tmp_path) is None
