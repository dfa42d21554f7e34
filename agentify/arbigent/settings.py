"""The runner's --config file read the way the arbigent CLI reads its own settings files.

The config uses the format of Arbigent's `.arbigent/settings.local.yml`: option names without `--`
as keys, nested maps flattened with `.`. For `arbigent run`, `run.<key>` wins over the top-level
`<key>`; for `arbigent run task`, `run.task.<key>` wins over `<key>` (the CLI does not read
`run.<key>` for tasks). Then:
- only options the command really has (`options.py`) become flags; every other key is ignored
  with a warning naming it, as the CLI ignores it;
- choice values are normalised to the CLI's case, and a value matching no choice is an error;
- `variables` (a map, or the CLI's `k=v,...` text) is written so the CLI reads back exactly that map;
- the aliases `openai-key`/`azure-openai-key` map to the canonical keys, and API keys go only to
  the child's environment;
- the options the runner decides itself (`RUNNER_OWNED`) are dropped with a warning.
A config that is not a YAML map is read as an argument file (`--name=value` tokens) through the
same rules. Values read from the config are never logged: `display_argv` shows `<config>`.

`stray_settings` reads the `.arbigent/settings*` files of the working directory, all four in the
CLI's order, and says when they would change what a run executes.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentify.arbigent.errors import ConfigError
from agentify.arbigent.options import (
    ALIASES,
    API_KEY_OPTION_BY_AI_TYPE,
    HIDDEN_LOG_LEVELS,
    RUNNER_OWNED,
    SCOPES,
    SENSITIVE_WORDS,
    TABLES,
    CliOptions,
    Command,
    Option,
)
from agentify.arbigent.variables import VariablesError, encode_variables, parse_variables
from agentify.arbigent.yamlfile import YamlFileError, read_yaml_file

CONFIG_PLACEHOLDER = "<config>"
SETTINGS_FILES = ("settings.local.yml", "settings.local.yaml", "settings.yml", "settings.yaml")
"""Read by the CLI from `.arbigent/` of its working directory, all that exist, first one winning."""
_TRUE, _FALSE = ("true", "t", "yes", "y", "on", "1"), ("false", "f", "no", "n", "off", "0")
"""Clikt's booleans, which the CLI accepts for a flag read from a settings file."""
_OPTION_NAMES = {name for table in TABLES for name in (*table.run, *table.task)}
_LOGGING_ONLY = {"log-level", "log-file", "ai-api-logging"}
"""Options that change only what is logged: a `run.<key>` of them missing tasks is not worth a warning."""


@dataclass(frozen=True)
class Flag:
    name: str
    value: str | None
    """`None` for a flag without a value (`--ai-api-logging`)."""

    def arg(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"

    def display(self) -> str:
        return f"--{self.name}" if self.value is None else f"--{self.name}={CONFIG_PLACEHOLDER}"


@dataclass(frozen=True)
class CommandSettings:
    """What the config gives one command: flags, and environment for the child (API keys)."""

    flags: tuple[Flag, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, *, without: Iterable[str] = ()) -> list[str]:
        skip = set(without)
        return [flag.arg() for flag in self.flags if flag.name not in skip]

    def display_argv(self, *, without: Iterable[str] = ()) -> list[str]:
        skip = set(without)
        return [flag.display() for flag in self.flags if flag.name not in skip]

    def value_of(self, name: str) -> str | None:
        return next((flag.value for flag in self.flags if flag.name == name), None)


@dataclass(frozen=True)
class RunSettings:
    run: CommandSettings = field(default_factory=CommandSettings)
    task: CommandSettings = field(default_factory=CommandSettings)
    secrets: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    """One line per ignored, mapped or dropped key, for the start-up log."""

    def for_command(self, command: Command) -> CommandSettings:
        return self.run if command == "run" else self.task


def load_settings(path: Path, cli: CliOptions) -> RunSettings:
    """Reads the --config file for the CLI version whose options are `cli`.

    Raises:
        ConfigError: missing, unreadable, hostile or oversized file, a value the CLI would refuse, a
            key this CLI version refuses, or an argument file that is not a list of `--name[=value]` options.
    """
    try:
        document = read_yaml_file(path, what="config file")
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    if document.error is not None or not isinstance(document.data, dict | None):
        return _from_argument_file(path, document.text, cli)
    return from_mapping(document.data or {}, str(path), cli)


def from_mapping(data: dict[Any, Any], source: str, cli: CliOptions) -> RunSettings:
    """Settings from a config already read into `data`; `source` names it in messages.

    Raises:
        ConfigError: a value the CLI would refuse, or a key this CLI version refuses.
    """
    flat = _flatten(data, source)
    for key, value in flat.items():
        refused = _replaced_key(key, value, cli)
        if refused is not None:
            raise ConfigError(f"{source}: {refused}")
    warnings: list[str] = []
    for alias, canonical in ALIASES.items():
        for scope in ("", *SCOPES.values()):
            if scope + alias in flat:
                value = flat.pop(scope + alias)
                flat.setdefault(scope + canonical, value)
                warnings.append(
                    f"config key '{scope}{alias}' is read as '{scope}{canonical}': the CLI accepts only the canonical "
                    "name in a settings file"
                )
    commands: dict[Command, CommandSettings] = {}
    secrets: list[str] = []
    for command in ("run", "task"):
        commands[command] = _command_settings(cli, command, flat, source, warnings, secrets)
    for key in flat:
        if not _known_key(key, cli):
            warnings.append(
                f"config key '{key}' is ignored: neither `arbigent run` nor `arbigent run task` of arbigent "
                f"{cli.label} has it"
            )
    return RunSettings(
        run=commands["run"],
        task=commands["task"],
        secrets=tuple(dict.fromkeys(secrets)),
        warnings=tuple(dict.fromkeys(warnings)),
    )


def _known_key(key: str, cli: CliOptions) -> bool:
    """A key the CLI reads for `run` or `run task` (it may still be overridden by a scoped one)."""
    if key.startswith("run.task."):
        return key.removeprefix("run.task.") in cli.task
    if key.startswith("run."):
        return key.removeprefix("run.") in cli.run
    return cli.known(key) is not None


def _replaced_key(key: str, value: Any, cli: CliOptions) -> str | None:
    """Says how to fix `key` when this CLI version refuses it (a non-blank superseded key fails every run)."""
    name = key.removeprefix("run.task.").removeprefix("run.")
    replacement = cli.replaced.get(name)
    if replacement is None or value is None or not _scalar(value).strip():
        return None
    return (
        f"'{key}' was replaced by '{key.removesuffix(name)}{replacement}' in arbigent {cli.label}, which fails "
        f"every run that still sets it: rename the key to '{key.removesuffix(name)}{replacement}'"
    )


def _command_settings(
    cli: CliOptions, command: Command, flat: dict[str, Any], source: str, warnings: list[str], secrets: list[str]
) -> CommandSettings:
    options = cli.options(command)
    scope = SCOPES[command]
    flags: list[Flag] = []
    env: dict[str, str] = {}
    for name, option in options.items():
        key = scope + name if scope + name in flat else name if name in flat else None
        if key is None:
            continue
        raw = flat[key]
        if raw is None or raw == "":
            continue
        if name in RUNNER_OWNED:
            warnings.append(f"config key '{key}' is ignored: {RUNNER_OWNED[name]}")
            continue
        value = convert(option, raw, f"{source}: {key}")
        if name == "log-level" and value in HIDDEN_LOG_LEVELS:
            warnings.append(f"config key '{key}' is ignored: {value} hides the results summary the runner reads")
            continue
        if option.env is not None:
            env[option.env] = str(value)
            secrets.append(str(value))
            continue
        if any(word in name for word in SENSITIVE_WORDS) and value:
            secrets.append(str(value))
        if option.kind == "flag":
            if value == "true":
                flags.append(Flag(name, None))
            continue
        flags.append(Flag(name, value))
    if command == "task":
        # `run.<key>` of an option that `run task` also has does not reach tasks: the CLI reads it only for `run`.
        shadowed = [f"run.{n}" for n in options if f"run.{n}" in flat and scope + n not in flat and n not in flat]
        shadowed = [k for k in shadowed if k.removeprefix("run.") not in RUNNER_OWNED.keys() | _LOGGING_ONLY]
        if shadowed:
            warnings.append(
                f"config keys {', '.join(shadowed)} apply to `arbigent run` only, not to run-arbigent-task "
                "(`arbigent run task` reads the top level and run.task); move them to the top level for both"
            )
    return CommandSettings(flags=tuple(flags), env=env)


def convert(option: Option, raw: Any, where: str) -> str:
    """A config value as the CLI option's text; flags give "true" or "false".

    Raises:
        ConfigError: a value the CLI would refuse, naming `where`.
    """
    text = raw if isinstance(raw, str) else _scalar(raw)
    if option.kind == "choice":
        match = next((c for c in option.choices if c == text.strip().lower()), None)
        if match is None:
            raise ConfigError(f"{where}: {text!r} is not one of {', '.join(option.choices)}")
        return match
    if option.kind == "flag":
        lowered = text.strip().lower()
        if lowered not in _TRUE + _FALSE:
            raise ConfigError(f"{where}: {text!r} is not true or false")
        return "true" if lowered in _TRUE else "false"
    if option.kind == "fraction":
        try:
            fraction = float(text.strip())
        except ValueError:
            raise ConfigError(f"{where}: {text!r} is not a number") from None
        if not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"{where}: {fraction:g} is not between 0 and 1")
        return text.strip()
    if option.kind in ("int", "port"):
        try:
            number = int(text.strip())
        except ValueError:
            raise ConfigError(f"{where}: {text!r} is not a whole number") from None
        if option.kind == "port" and not 1 <= number <= 65535:
            raise ConfigError(f"{where}: {number} is not a port number (1-65535)")
        return str(number)
    if option.kind == "variables":
        try:
            return encode_variables(raw) if isinstance(raw, dict) else encode_variables(parse_variables(text))
        except VariablesError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return text


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_scalar(v) for v in value)
    return str(value)


def _flatten(data: dict[Any, Any], source: str, *, strict: bool = True) -> dict[str, Any]:
    """The CLI's view of a settings map: nested keys joined with `.`, lists joined with `,`.

    A map under a `variables` key is kept whole (the runner encodes it). With `strict`, any other
    map value at a key that is an option name is an error, since the CLI would silently not see it.
    """
    flat: dict[str, Any] = {}

    def walk(node: dict[Any, Any], prefix: str) -> None:
        for raw_key, value in node.items():
            key = f"{prefix}{raw_key}"
            if isinstance(value, dict) and str(raw_key) == "variables":
                flat[key] = {str(k): _scalar(v) if v is not None else "" for k, v in value.items()}
            elif isinstance(value, dict) and strict and str(raw_key) in _OPTION_NAMES:
                raise ConfigError(f"{source}: {key} must be a single value, not a map")
            elif isinstance(value, dict):
                walk(value, key + ".")
            else:
                flat[key] = value

    walk(data, "")
    return flat


def _from_argument_file(path: Path, text: str, cli: CliOptions) -> RunSettings:
    """A config that is not YAML: `--name=value`, `--name value` and `--flag` tokens, `#` comments.

    Raises:
        ConfigError: a token that is not an option, or an option without its value.
    """
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as exc:
        raise ConfigError(f"config file {path} is neither a YAML map nor a valid argument file: {exc}") from None
    data: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            raise ConfigError(f"config file {path} (an argument file): {token!r} is not an --option")
        name, sep, value = token[2:].partition("=")
        option = cli.known(ALIASES.get(name, name))
        if not sep and option is not None and option.kind == "flag":
            value = "true"
        elif not sep:
            if i >= len(tokens) or tokens[i].startswith("--"):
                raise ConfigError(f"config file {path} (an argument file): --{name} needs a value")
            value = tokens[i]
            i += 1
        data[name] = value
    return from_mapping(data, f"config file {path}", cli)


def stray_settings(directory: Path, cli: CliOptions) -> str | None:
    """Describes the Arbigent settings in `directory/.arbigent/` that would change what runs, if any.

    The CLI reads all four settings files of its working directory and chains them; a `tags:`,
    `dry-run:` or `working-directory:` there would silently alter every run the runner starts, and
    `log-level: warn` would hide the results it reads. A key this CLI version refuses (a leftover
    `ios-real-device-id` on a CLI with `--device-id`) would fail every run.
    """
    sources = list(_settings_sources(directory))
    for where, flat in sources:
        refused = next((p for k, v in flat.items() if (p := _replaced_key(k, v, cli)) is not None), None)
        if refused is not None:
            return f"{where}: {refused}"
    problems: dict[str, str] = {}
    for command in ("run", "task"):
        for name in cli.options(command):
            found = _chained(sources, SCOPES[command] + name, name)
            if found is None:
                continue
            where, key, value = found
            text = value if isinstance(value, str) else _scalar(value)
            owned = name in RUNNER_OWNED and name != "project-file" and text.strip().lower() not in ("",) + _FALSE
            if owned or (name == "log-level" and text.strip().lower() in HIDDEN_LOG_LEVELS):
                problems.setdefault(f"{where}:{key}", f"{where} sets {key}")
    if not problems:
        return None
    return (
        f"{'; '.join(problems.values())}, which would change what every run executes or hide its results; "
        "remove those keys or point the runner's --working-directory at another directory"
    )


def _settings_sources(directory: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    for name in SETTINGS_FILES:
        candidate = directory / ".arbigent" / name
        if not candidate.exists():
            continue
        try:
            document = read_yaml_file(candidate, what="settings file")
        except YamlFileError:
            continue
        if isinstance(document.data, dict):
            yield candidate, _flatten(document.data, str(candidate), strict=False)


def _chained(sources: list[tuple[Path, dict[str, Any]]], *keys: str) -> tuple[Path, str, Any] | None:
    """The first of `keys` present in the first file that has one: the CLI's ChainedValueSource."""
    for path, flat in sources:
        for key in keys:
            if key in flat:
                return path, key, flat[key]
    return None


def api_key_option(ai_type: str | None) -> str | None:
    """The option holding the API key for `ai_type` (default openai)."""
    return API_KEY_OPTION_BY_AI_TYPE.get(ai_type or "openai")
