"""The --config file read the way the arbigent CLI reads its settings files (docs/arbigent-cli-facts.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentify.arbigent.errors import ConfigError
from agentify.arbigent.options import V0_77
from agentify.arbigent.settings import RunSettings, load_settings, stray_settings
from agentify.arbigent.variables import VariablesError, encode_variables, parse_variables


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path: Path) -> RunSettings:
    """The config as the runner reads it for arbigent 0.77.0 (test_versions.py covers the newer tables)."""
    return load_settings(path, V0_77)


def test_the_cli_references_own_example_runs_with_run_and_task_keys_where_they_belong(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "log-level: info\nrun:\n  log-level: debug\n  task:\n    max-step: 15\n"))
    assert settings.run.argv() == ["--log-level=debug"]
    assert settings.task.argv() == ["--log-level=info", "--max-step=15"]
    assert settings.warnings == ()


def test_run_keys_override_the_top_level_but_do_not_reach_tasks(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "ai-type: openai\nos: android\nrun:\n  os: ios\n"))
    assert settings.run.argv() == ["--ai-type=openai", "--os=ios"]
    assert settings.task.argv() == ["--ai-type=openai", "--os=android"]
    only_run = load(write(tmp_path, "run:\n  openai-model-name: m\n"))
    assert only_run.task.argv() == []
    assert any("run.openai-model-name apply to `arbigent run` only" in w for w in only_run.warnings)


def test_keys_the_commands_do_not_have_are_ignored_with_a_warning_naming_each(tmp_path: Path) -> None:
    text = "include-app-ui-structure: true\ninstruction:\n  scenario-ids: a\nrun:\n  max-step: 3\n  device-id: x\n"
    settings = load(write(tmp_path, text))
    assert settings.run.argv() == [] and settings.task.argv() == []
    for key in ("include-app-ui-structure", "instruction.scenario-ids", "run.max-step", "run.device-id"):
        assert any(f"config key '{key}' is ignored" in w for w in settings.warnings), key


@pytest.mark.parametrize(
    ("line", "flag"),
    [("log-level: INFO", "--log-level=info"), ("os: Android", "--os=android"), ("ai-type: OpenAI", "--ai-type=openai")],
)
def test_choices_are_written_in_the_clis_case(tmp_path: Path, line: str, flag: str) -> None:
    assert load(write(tmp_path, line + "\n")).run.argv() == [flag]


def test_a_value_matching_no_choice_is_a_clear_start_up_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config.yaml: run.os: 'Androidx' is not one of android, ios, web"):
        load(write(tmp_path, "run:\n  os: Androidx\n"))


def test_variables_with_commas_and_quotes_read_back_exactly(tmp_path: Path) -> None:
    text = """variables:\n  user_name: 'Ada, Lovelace'\n  quote: 'say "hi"'\n  apostrophe: "it's"\n  pin: 1234\n"""
    text += "  padded: ' x '\n  empty: ''\n  both: \"a'b,\\\"c\"\n"
    settings = load(write(tmp_path, text))
    [flag] = settings.run.argv()
    assert flag.startswith("--variables=")
    assert parse_variables(flag.removeprefix("--variables=")) == {
        "user_name": "Ada, Lovelace",
        "quote": 'say "hi"',
        "apostrophe": "it's",
        "pin": "1234",
        "padded": " x ",
        "empty": "",
        "both": "a'b,\"c",
    }
    assert settings.task.argv() == [], "`run task` has no --variables"


def test_a_variable_name_the_cli_refuses_is_refused_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Invalid variable name: 'user-name'"):
        load(write(tmp_path, "variables:\n  user-name: ada\n"))


def test_variables_given_as_the_clis_text_are_checked_like_the_cli(tmp_path: Path) -> None:
    assert load(write(tmp_path, "variables: 'a=1,b=\"x, y\"'\n")).run.argv() == ['--variables=a=1,b="x, y"']
    with pytest.raises(ConfigError, match="Unmatched quote in value for key 'b'"):
        load(write(tmp_path, "variables: 'a=1,b=\"x'\n"))


def test_the_variable_parser_port_matches_the_clis_own_tests() -> None:
    """Cases of arbigent-cli/src/test/kotlin/VariableParserTest.kt (0.77.0)."""
    assert parse_variables("name=John,age=30") == {"name": "John", "age": "30"}
    assert parse_variables('message="Hello World"') == {"message": "Hello World"}
    assert parse_variables("items='a,b,c'") == {"items": "a,b,c"}
    assert parse_variables("url=https://example.com?a=b") == {"url": "https://example.com?a=b"}
    assert parse_variables("") == {}
    for bad, message in (("novalue", "Invalid variable format"), ("1key=x", "Invalid variable name")):
        with pytest.raises(VariablesError, match=message):
            parse_variables(bad)
    with pytest.raises(VariablesError):
        encode_variables({"bad key": "x"})


def test_api_keys_and_their_aliases_go_only_to_the_environment(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "openai-key: key-one\nrun:\n  gemini-api-key: key-two\n"))
    assert settings.run.env == {"OPENAI_API_KEY": "key-one", "GEMINI_API_KEY": "key-two"}
    assert settings.task.env == {"OPENAI_API_KEY": "key-one"}
    assert settings.run.argv() == [] and settings.task.argv() == []
    assert set(settings.secrets) == {"key-one", "key-two"}
    assert any("'openai-key' is read as 'openai-api-key'" in w for w in settings.warnings)


def test_the_runners_own_options_are_dropped_with_a_warning(tmp_path: Path) -> None:
    text = "project-file: other.yaml\ntags: smoke\nscenario-ids: a\ndry-run: true\nshard: 1/2\nos: web\n"
    settings = load(write(tmp_path, text))
    assert settings.run.argv() == ["--os=web"]
    for key in ("project-file", "tags", "scenario-ids", "dry-run", "shard"):
        assert any(w.startswith(f"config key '{key}' is ignored") for w in settings.warnings), key


def test_a_log_level_that_hides_the_results_summary_is_dropped(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "log-level: WARN\n"))
    assert settings.run.argv() == [] and settings.task.argv() == []
    assert any("hides the results summary" in w for w in settings.warnings)


def test_flags_follow_clikts_booleans(tmp_path: Path) -> None:
    assert load(write(tmp_path, "ai-api-logging: true\n")).run.argv() == ["--ai-api-logging"]
    assert load(write(tmp_path, "ai-api-logging: 'off'\n")).run.argv() == []
    with pytest.raises(ConfigError, match="is not true or false"):
        load(write(tmp_path, "ai-api-logging: maybe\n"))


def test_numbers_and_ports_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'many' is not a whole number"):
        load(write(tmp_path, "max-step: many\n"))
    with pytest.raises(ConfigError, match="70000 is not a port number"):
        load(write(tmp_path, "ios-real-device-port: 70000\n"))


def test_logged_command_lines_show_no_value_from_the_config(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "openai-endpoint: https://private.example/v1\nai-api-logging: true\n"))
    assert settings.run.display_argv() == ["--openai-endpoint=<config>", "--ai-api-logging"]


def test_sensitive_looking_values_are_secrets(tmp_path: Path) -> None:
    settings = load(write(tmp_path, "ios-xctest-apple-team-id: ABCDE12345\n"))
    assert settings.secrets == ("ABCDE12345",)


def test_a_config_that_is_not_yaml_is_read_as_an_argument_file_through_the_same_rules(tmp_path: Path) -> None:
    path = write(tmp_path, "# arbigent options\n--ai-type=Gemini --os web --openai-key k123\n--tags=x\n", "c.args")
    settings = load(path)
    assert settings.run.argv() == ["--ai-type=gemini", "--os=web"]
    assert settings.run.env == {"OPENAI_API_KEY": "k123"}
    assert any("'tags' is ignored" in w for w in settings.warnings)


def test_an_argument_file_with_a_stray_word_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'run' is not an --option"):
        load(write(tmp_path, "run --ai-type=openai\n", "c.args"))


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load(tmp_path / "nope.yaml")


def test_an_empty_config_file_means_no_options(tmp_path: Path) -> None:
    settings = load(write(tmp_path, ""))
    assert settings.run.argv() == [] and settings.task.argv() == []


def settings_file(directory: Path, name: str, text: str) -> None:
    (directory / ".arbigent").mkdir(exist_ok=True)
    (directory / ".arbigent" / name).write_text(text)


def test_a_settings_file_in_the_working_directory_that_filters_runs_is_found(tmp_path: Path) -> None:
    settings_file(tmp_path, "settings.local.yml", "openai-api-key: k\nrun:\n  dry-run: true\n")
    problem = stray_settings(tmp_path, V0_77)
    assert problem is not None and "settings.local.yml sets run.dry-run" in problem


def test_every_settings_file_is_read_not_only_the_first(tmp_path: Path) -> None:
    settings_file(tmp_path, "settings.local.yml", "openai-api-key: k\n")
    settings_file(tmp_path, "settings.yml", "tags: smoke\n")
    problem = stray_settings(tmp_path, V0_77)
    assert problem is not None and "settings.yml sets tags" in problem


def test_a_higher_settings_file_wins_over_a_lower_one(tmp_path: Path) -> None:
    settings_file(tmp_path, "settings.local.yml", "log-level: info\n")
    settings_file(tmp_path, "settings.yaml", "log-level: warn\n")
    assert stray_settings(tmp_path, V0_77) is None
    settings_file(tmp_path, "settings.local.yml", "run:\n  task:\n    log-level: error\n")
    problem = stray_settings(tmp_path, V0_77)
    assert problem is not None and "sets run.task.log-level" in problem


def test_a_settings_file_with_only_keys_and_options_is_fine(tmp_path: Path) -> None:
    settings_file(tmp_path, "settings.yml", "openai-api-key: k\nos: android\nrun:\n  dry-run: false\n")
    assert stray_settings(tmp_path, V0_77) is None
