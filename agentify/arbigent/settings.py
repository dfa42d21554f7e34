"""The runner's --config file turned into `arbigent run` flags and child environment.

The config uses the format of Arbigent's own settings file: option names without `--` as keys, and
a `run:` section whose keys override the top-level ones. API keys go into the child's environment
(never into argv); the options the runner decides itself are dropped. A config that is not a YAML
map is handed to the CLI as an argument file (`@<path>`), after checking it does not set any of
the runner's own options. Values read from the config are never logged: `display_argv` shows
`<config>` in their place.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentify.arbigent.errors import ConfigError

CONFIG_PLACEHOLDER = "<config>"

API_KEY_ENV = {
    "openai-api-key": "OPENAI_API_KEY",
    "gemini-api-key": "GEMINI_API_KEY",
    "azure-openai-api-key": "AZURE_OPENAI_API_KEY",
}
API_KEY_OPTION_BY_AI_TYPE = {
    "openai": "openai-api-key",
    "gemini": "gemini-api-key",
    "azureopenai": "azure-openai-api-key",
}
RUNNER_OWNED = {
    "project-file": "the runner passes its --project file",
    "tags": "each tool selects its own tag",
    "scenario-ids": "run-arbigent-scenarios selects scenarios",
    "dry-run": "the runner runs the tests",
    "shard": "the runner runs the whole selection",
    "working-directory": "use the runner's --working-directory",
}
HIDDEN_LOG_LEVELS = {"warn", "error"}
FLAG_OPTIONS = {"ai-api-logging", "dry-run"}
KNOWN_OPTIONS = {
    "ai-type",
    "os",
    "variables",
    "log-level",
    "log-file",
    "path",
    "ai-api-logging",
    "openai-endpoint",
    "openai-model-name",
    "gemini-endpoint",
    "gemini-model-name",
    "azure-openai-endpoint",
    "azure-openai-api-version",
    "azure-openai-model-name",
    *API_KEY_ENV,
    *RUNNER_OWNED,
}
OTHER_SUBCOMMANDS = {"scenarios", "tags", "graph", "instruction", "guide"}
SETTINGS_FILES = ("settings.local.yml", "settings.local.yaml", "settings.yml", "settings.yaml")

_OPTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SENSITIVE = ("key", "token", "secret", "password", "team")


@dataclass(frozen=True)
class Flag:
    name: str
    value: str | None
    """`None` for a flag without a value (`--ai-api-logging`)."""

    def arg(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"

    def display(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={CONFIG_PLACEHOLDER}"


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    flags: tuple[Flag, ...] = ()
    env: dict[str, str] | None = None
    argument_file: Path | None = None
    secrets: tuple[str, ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()
    """(key, why) for config keys that were dropped."""
    unknown: tuple[str, ...] = ()
    """Keys that are not `run` options as of Arbigent 0.77; passed on anyway (newer CLIs may know them)."""

    def argv(self) -> list[str]:
        tail = [f"@{self.argument_file}"] if self.argument_file is not None else []
        return [flag.arg() for flag in self.flags] + tail

    def display_argv(self) -> list[str]:
        tail = [f"@{self.argument_file}"] if self.argument_file is not None else []
        return [flag.display() for flag in self.flags] + tail

    def value_of(self, name: str) -> str | None:
        return next((flag.value for flag in self.flags if flag.name == name), None)


def load_settings(path: Path) -> RunSettings:
    """Reads the --config file.

    Raises:
        ConfigError: missing or unreadable file, a key that is not an option name, or an argument
            file that sets one of the runner's own options.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = text
    if data is None:
        return RunSettings()
    if not isinstance(data, dict):
        return _argument_file(path, text)
    return _from_mapping(path, data)


def effective_options(data: dict[Any, Any]) -> dict[str, Any]:
    """Top-level options overridden by the `run:` section; sections of other subcommands skipped."""
    merged = {
        str(k): v for k, v in data.items() if not (isinstance(v, dict) and (k == "run" or k in OTHER_SUBCOMMANDS))
    }
    run = data.get("run")
    if isinstance(run, dict):
        merged.update({str(k): v for k, v in run.items()})
    return merged


def _from_mapping(path: Path, data: dict[Any, Any]) -> RunSettings:
    flags: list[Flag] = []
    env: dict[str, str] = {}
    secrets: list[str] = []
    ignored: list[tuple[str, str]] = []
    unknown: list[str] = []
    for key, value in effective_options(data).items():
        if not _OPTION_NAME.match(key):
            hint = key.lower().replace("_", "-")
            raise ConfigError(
                f"config file {path}: key '{key}' is not an `arbigent run` option name (did you mean '{hint}'?)"
            )
        if value is None or value == "":
            continue
        if key in RUNNER_OWNED:
            ignored.append((key, RUNNER_OWNED[key]))
            continue
        text = _option_value(value)
        if key == "log-level" and text.lower() in HIDDEN_LOG_LEVELS:
            ignored.append((key, "warn and error hide the results summary the runner reads"))
            continue
        if key in API_KEY_ENV:
            env[API_KEY_ENV[key]] = text
            secrets.append(text)
            continue
        if key not in KNOWN_OPTIONS and not key.startswith("ios-"):
            unknown.append(key)
        if any(word in key for word in _SENSITIVE):
            secrets.append(text)
        if key in FLAG_OPTIONS:
            if value is True or text.lower() == "true":
                flags.append(Flag(key, None))
            continue
        flags.append(Flag(key, text))
    return RunSettings(
        flags=tuple(flags), env=env, secrets=tuple(secrets), ignored=tuple(ignored), unknown=tuple(unknown)
    )


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={_option_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(_option_value(v) for v in value)
    return str(value)


def _argument_file(path: Path, text: str) -> RunSettings:
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as exc:
        raise ConfigError(f"config file {path} is neither a YAML map nor a valid argument file: {exc}") from None
    for token in tokens:
        name = token.split("=", 1)[0].removeprefix("--")
        if token.startswith("--") and name in RUNNER_OWNED:
            raise ConfigError(
                f"config file {path} (an argument file) sets --{name}, which the runner decides "
                f"({RUNNER_OWNED[name]}); remove it"
            )
    return RunSettings(argument_file=path.resolve())


def stray_settings(directory: Path) -> str | None:
    """Describes an Arbigent settings file in `directory` that would change what runs, if any.

    The CLI reads `.arbigent/settings*.yml` from its working directory; a `tags:` or `dry-run:` there
    would silently alter every run the runner starts.
    """
    for name in SETTINGS_FILES:
        candidate = directory / ".arbigent" / name
        try:
            data = yaml.safe_load(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(data, dict):
            return None
        keys = [
            k
            for k, v in effective_options(data).items()
            if k in RUNNER_OWNED and k != "project-file" and v not in (None, "", False)
        ]
        if keys:
            return (
                f"{candidate} sets {', '.join(keys)}, which would change what every run executes; "
                "remove those keys or point the runner's --working-directory at another directory"
            )
        return None
    return None
