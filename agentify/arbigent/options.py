"""The options of `arbigent run` and `arbigent run task`: one table per range of CLI versions.

Nothing else may reach the CLI as a flag: an option it does not have is a usage error (`no such
option`, exit 1) that stops every run, and a flag one version needs is an error in another.

- `0.77.0`: read from its source (`RunCommand.kt`, `RunTaskCommand.kt`, `CommonOptions.kt`,
  `AiConfig.kt`, Clikt 5.0.2). Releases before it (and the unverified 0.78-0.80) get this table.
- `0.81.x` (0.81.0, 0.81.1): the same options; the `wrapper` command is new.
- `main after 0.81.1`: builds from main (`0.81.1-N-g<commit>`) and later releases. `--device-id`
  replaces `--ios-real-device-id` (which is hidden and fails any run that sets it), `--ai-type
  anthropic` and the `--jev-*` options are new, and so is the `sort` command.
The contract test (tests/arbigent/test_contract.py) holds each table against the real lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["text", "choice", "flag", "int", "port", "variables", "fraction"]
Command = Literal["run", "task"]
Version = tuple[int, int, int, int]
"""major, minor, patch, and the commits after that release (a `git describe` build from main)."""


@dataclass(frozen=True)
class Option:
    name: str
    """The canonical long name without `--`: the only name a settings file may use as a key."""
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    """For `choice`: the CLI's values, which are case-sensitive."""
    env: str | None = None
    """For API keys: the environment variable the CLI also reads. The runner puts keys only there."""


@dataclass(frozen=True)
class CliOptions:
    """What one range of arbigent versions accepts."""

    label: str
    since: Version
    """The first version of the range."""
    run: Mapping[str, Option]
    task: Mapping[str, Option]
    commands: frozenset[str]
    device_option: Literal["device-id", "ios-real-device-id"]
    """How a run names its device: `--device-id` for every OS, or on 0.77.0 an iPhone's UDID only."""
    replaced: Mapping[str, str] = field(default_factory=dict)
    """Settings keys this version refuses (the run fails), to the key that replaced each."""

    def options(self, command: Command) -> Mapping[str, Option]:
        return self.run if command == "run" else self.task

    def known(self, name: str) -> Option | None:
        return self.run.get(name) or self.task.get(name)


def _opts(*options: Option) -> dict[str, Option]:
    return {o.name: o for o in options}


_OPENAI_GEMINI_AZURE = (
    Option("openai-endpoint"),
    Option("openai-model-name"),
    Option("openai-api-key", env="OPENAI_API_KEY"),
    Option("gemini-endpoint"),
    Option("gemini-model-name"),
    Option("gemini-api-key", env="GEMINI_API_KEY"),
    Option("azure-openai-endpoint"),
    Option("azure-openai-api-version"),
    Option("azure-openai-model-name"),
    Option("azure-openai-api-key", env="AZURE_OPENAI_API_KEY"),
)
_ANTHROPIC = (
    Option("anthropic-endpoint"),
    Option("anthropic-model-name"),
    Option("anthropic-api-key", env="ANTHROPIC_API_KEY"),
)
_JEV = (
    Option("jev-api-key", env="TYPESAFE_API_KEY"),
    Option("jev-base-url"),
    Option("jev-model"),
    Option("jev-mode", "choice", ("disabled", "shadow", "active")),
    Option("jev-action-threshold", "fraction"),
    Option("jev-goal-threshold", "fraction"),
)
_COMMON = (
    Option("ai-api-logging", "flag"),
    Option("os", "choice", ("android", "ios", "web")),
    Option("ios-xctest-apple-team-id"),
    Option("ios-real-device-port", "port"),
    Option("log-level", "choice", ("debug", "info", "warn", "error")),
    Option("log-file"),
    Option("working-directory"),
)
_RUN_ONLY = (
    Option("project-file"),
    Option("path"),
    Option("variables", "variables"),
    Option("scenario-ids"),
    Option("tags"),
    Option("dry-run", "flag"),
    Option("shard"),
)
_TASK_ONLY = (Option("max-step", "int"), Option("max-retry", "int"))

_OLD_AI = (Option("ai-type", "choice", ("openai", "gemini", "azureopenai")), *_OPENAI_GEMINI_AZURE)
_OLD_DEVICE = (*_COMMON, Option("ios-real-device-id"))
_NEW_AI = (Option("ai-type", "choice", ("openai", "gemini", "azureopenai", "anthropic")), *_OPENAI_GEMINI_AZURE)
_NEW_DEVICE = (*_COMMON, Option("device-id"), *_ANTHROPIC, *_JEV)
_OLD_COMMANDS = frozenset({"run", "scenarios", "tags", "graph", "instruction", "guide"})

V0_77 = CliOptions(
    label="0.77.0",
    since=(0, 0, 0, 0),
    run=_opts(*_OLD_AI, *_OLD_DEVICE, *_RUN_ONLY),
    task=_opts(*_OLD_AI, *_OLD_DEVICE, *_TASK_ONLY),
    commands=_OLD_COMMANDS,
    device_option="ios-real-device-id",
)
V0_81 = CliOptions(
    label="0.81.x",
    since=(0, 81, 0, 0),
    run=V0_77.run,
    task=V0_77.task,
    commands=_OLD_COMMANDS | {"wrapper"},
    device_option="ios-real-device-id",
)
MAIN = CliOptions(
    label="main after 0.81.1",
    since=(0, 81, 1, 1),
    run=_opts(*_NEW_AI, *_NEW_DEVICE, *_RUN_ONLY),
    task=_opts(*_NEW_AI, *_NEW_DEVICE, *_TASK_ONLY),
    commands=_OLD_COMMANDS | {"wrapper", "sort"},
    device_option="device-id",
    replaced={"ios-real-device-id": "device-id"},
)
TABLES = (V0_77, V0_81, MAIN)
NEWEST = TABLES[-1]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(\d+)-g[0-9a-f]+)?")


def parse_version(text: str) -> Version | None:
    """`0.77.0` -> (0, 77, 0, 0); a build from main, `0.81.1-20-g24b7c06[.dirty]` -> (0, 81, 1, 20)."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    major, minor, patch, after = match.groups()
    return int(major), int(minor), int(patch), int(after or 0)


def table_for(version: str | None) -> CliOptions | None:
    """The table of `version`, or None when it cannot be read (the caller then uses `NEWEST`)."""
    parsed = parse_version(version) if version else None
    if parsed is None:
        return None
    return next(table for table in reversed(TABLES) if parsed >= table.since)


ALIASES = {"openai-key": "openai-api-key", "azure-openai-key": "azure-openai-api-key"}
"""Second flag names of the CLI. They are not valid settings-file keys; the runner maps them with a warning."""
API_KEY_OPTION_BY_AI_TYPE = {
    "openai": "openai-api-key",
    "gemini": "gemini-api-key",
    "azureopenai": "azure-openai-api-key",
    "anthropic": "anthropic-api-key",
}
API_KEY_ENV = {o.name: o.env for table in TABLES for o in table.run.values() if o.env}
"""Every option whose value the runner hands over in the environment, of every version."""
SCOPES: dict[Command, str] = {"run": "run.", "task": "run.task."}
"""Where a settings file scopes a key to the command: Clikt's `joinSubcommands = "."` keys."""

RUNNER_OWNED = {
    "project-file": "the runner passes its --project file",
    "tags": "each tool selects its own tag",
    "scenario-ids": "run-arbigent-scenarios selects scenarios",
    "dry-run": "the runner runs the tests",
    "shard": "the runner runs the whole selection",
    "working-directory": "use the runner's --working-directory",
}
HIDDEN_LOG_LEVELS = ("warn", "error")
"""Log levels that hide the `I:` lines (the results summary) the runner reads."""
SENSITIVE_WORDS = ("key", "token", "secret", "password", "team")
"""The CLI masks options whose names hold these words in its help; the runner treats their values as secrets."""
