"""A stand-in for the `arbigent` CLI, as strict as the real one where the runner can tell, acting as
the version FAKE_ARBIGENT_VERSION names (versions.py: 0.77.0, 0.81.0, 0.81.1, or by default a build
from main after 0.81.1). What changed after 0.77.0 lives in versions.py (options, commands),
devices.py (how a device is chosen) and commands.py (`wrapper`, `sort`).

Facts of 0.77.0 it copies (read from RunCommand.kt, RunTaskCommand.kt, CommonOptions.kt, AiConfig.kt,
VariableParser.kt, YamlValueSource.kt, main.kt, and Clikt 5.0.2; see docs/arbigent-cli-facts.md):
- Commands `run` (with subcommand `task GOAL`), `scenarios`, `tags`, `graph`, `instruction`,
  `guide` (and `wrapper`, `sort` where the version has them); `arbigent --help` lists them and exits
  0. There is no `--version`.
- Exactly the options of `run` and of `run task` of the version, `--name=value`
  or `--name value`; `--tags`/`--scenario-ids` split on `,` and repeat; other options: last wins.
  A flag given a value, an unknown option, a missing value or argument, an extra argument, an
  unknown subcommand: Clikt's usage error on stderr, `Usage: arbigent run [<options>] ...`, a blank
  line, `Error: <message>`, exit 1.
- `@file` arguments are expanded (shell-like tokens, `#` comments) until `--`, which also ends the
  options; `@@x` is the literal argument `@x`.
- Settings: all four `.arbigent/settings{.local,}.y{a,}ml` of the CWD that exist, in the order
  local.yml, local.yaml, settings.yml, settings.yaml; for each file the command-scoped key
  (`run.<key>`, `run.task.<key>` for tasks) and then the global `<key>`; nested maps flattened with
  `.`, lists joined with `,`, null read as "". Only the canonical long option name is a key.
  Precedence: flag > environment (API keys, ARBIGENT_DEVICE_ID) > settings files > default.
- Choices are case-sensitive (`--ai-type` openai|gemini|azureopenai, `--os` android|ios|web,
  `--log-level` debug|info|warn|error): `invalid value for --os: invalid choice: Android. (choose
  from android, ios, web)`. Flags read from a settings file accept Clikt's booleans. `--max-step`
  and `--max-retry` are integers. `--variables` goes through VariableParser: its `Invalid variable
  format`, `Unmatched quote` and `Invalid variable name` messages become `invalid value for
  --variables: ...` usage errors.
- Errors that are not usage errors (a missing `--project-file`, a missing API key, a bad
  `--ios-real-device-port`) are printed without `Error:`; JVM exceptions (project file not found,
  tags with scenario ids, no device) as `Exception in thread "main" ...` with a stack trace. Exit 1.
- `run`: the selection rules (leaves, tags minus chain members, ids), `[Execution Plan] Selected
  scenarios for execution: [..]`; `--dry-run` echoes the plan without timestamps and exits 0 without
  results; the device check ("No available device found") comes after it.
- `run task GOAL [--max-step N] [--max-retry N]`: one scenario with id `task`; no plan line and no
  `Final Results` block: `All scenarios completed successfully` or `Some scenarios failed`.
- Every log line is `HH:MM:SS L: message` (UTC) on stdout when stdout is not a console; the results
  summary is printed at level I (hidden by `--log-level=warn`).
- A scenario without `id` gets a random UUID. A failing scenario is retried `maxRetry` times.
- `<working dir>/arbigent-result/`: result.yml (per scenario `id`, `goal`, `executionStatus`,
  `isSuccess`, `histories` of attempts with `agentResults` and `steps` whose `screenshotFilePath`
  is an absolute path into `screenshots/`), report.html, `screenshots/<step id>.png`.
- SIGTERM/SIGINT: the shutdown hook writes result.yml and report.html, then exit 143/130.
- On JDK 22-24 the CLI sees a console even with piped stdio and draws its terminal UI instead of
  log lines, unless JAVA_OPTS holds `-Djdk.console=java.base` (simulated by FAKE_ARBIGENT_JDK).
Known differences: no "Did you mean" suggestions; no real device, AI or screenshots of an app.

Test switches (environment):
  FAKE_ARBIGENT_RECORD=<file>        append a JSON line when started: {"argv", "cwd", "pid", "ppid", "pgid", "sid",
                                     "stdin": "devnull"|"other", "java_opts", "env": {API key env var: sha256 or null}},
                                     and one when a run ends: {"pid", "exit": <code>}
  FAKE_ARBIGENT_FAIL=<id,id>         these scenarios fail (and every scenario whose chain holds one); `task`: a task
  FAKE_ARBIGENT_STEP_DELAY=<s>       sleep before each step (default 0)
  FAKE_ARBIGENT_HANG=1               hang after the first scenario started (until a signal)
  FAKE_ARBIGENT_IGNORE_SIGTERM=1     ignore SIGTERM (only SIGKILL stops it)
  FAKE_ARBIGENT_BIG_OUTPUT=<bytes>   print that many bytes of extra log lines before the first scenario
  FAKE_ARBIGENT_ECHO_KEY=1           print the API key in use (to test redaction)
  FAKE_ARBIGENT_VERSION=<version>    the version to act as (default: versions.NEWEST)
  FAKE_ARBIGENT_DEVICES=<id,id>      the connected devices (default: emulator-5554); result.yml names the one used
  FAKE_ARBIGENT_NO_DEVICE=1          fail like a machine without a device ("No available device found")
  FAKE_ARBIGENT_SCREENSHOT_BYTES=<n> make each screenshot a valid PNG of about n bytes (default: a few hundred)
  FAKE_ARBIGENT_JDK=<major>          the Java version to act as; 22-24 draw the terminal UI without -Djdk.console
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shlex
import signal
import struct
import sys
import time
import uuid
import zlib
from pathlib import Path
from typing import Any, NoReturn

import commands
import devices
import yaml
from versions import version

VERSION = version()
RUN_OPTIONS = VERSION.run_options
TASK_OPTIONS = VERSION.task_options
SECOND_NAMES = {"openai-key": "openai-api-key", "azure-openai-key": "azure-openai-api-key"}
FLAGS = {"ai-api-logging", "dry-run", "diff", "comments", "no-comments"}
MULTIPLE = {"tags", "scenario-ids"}
INTS = {"max-step", "max-retry"}
FRACTIONS = {"jev-action-threshold", "jev-goal-threshold"}
CHOICES = {
    "ai-type": ["openai", "gemini", "azureopenai", *(["anthropic"] if VERSION.device_id else [])],
    "os": ["android", "ios", "web"],
    "log-level": ["debug", "info", "warn", "error"],
    "jev-mode": ["disabled", "shadow", "active"],
}
API_KEY_ENV = {
    "openai-api-key": "OPENAI_API_KEY",
    "gemini-api-key": "GEMINI_API_KEY",
    "azure-openai-api-key": "AZURE_OPENAI_API_KEY",
    "anthropic-api-key": "ANTHROPIC_API_KEY",
    "jev-api-key": "TYPESAFE_API_KEY",
}
ENV = {**API_KEY_ENV, "device-id": "ARBIGENT_DEVICE_ID"}
TRACKED = ("device-id", *(name for name in RUN_OPTIONS if name.startswith("jev-")))
"""Options a newer `run` refuses when typed before `task` (DeviceIdOption.kt, JevOptions.kt)."""
TRUE, FALSE = {"true", "t", "1", "yes", "y", "on"}, {"false", "f", "0", "no", "n", "off"}
SETTINGS_FILES = ("settings.local.yml", "settings.local.yaml", "settings.yml", "settings.yaml")
LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3}
COMMANDS = VERSION.commands
ROOT_USAGE = "Usage: arbigent [<options>] <command> [<args>]..."
RUN_USAGE = "Usage: arbigent run [<options>] <command> [<args>]..."
TASK_USAGE = "Usage: arbigent run task [<options>] <goal>"
HELP = {
    "run": "Execute test scenarios",
    "scenarios": "List scenarios in the project",
    "tags": "List tags in the project",
    "graph": "Show the scenario dependency graph",
    "instruction": "Print instructions for AI agents",
    "guide": "Show the getting started guide",
    "wrapper": "Generate the arbigentw wrapper script that downloads and runs a pinned arbigent release",
    "sort": "Reorder scenarios into depth-first dependency order and refresh the position comments above them",
}
ROOT_HELP = f"{ROOT_USAGE}\n\nOptions:\n  -h, --help  Show this message and exit\n\nCommands:\n" + "".join(
    f"  {name:<12} {HELP[name]}\n" for name in COMMANDS
)


class State:
    """What the shutdown hook needs: where results go and what has run so far."""

    result_dir: Path | None = None
    selected: list[str] = []
    results: dict[str, bool] = {}
    histories: dict[str, list[dict[str, Any]]] = {}
    goals: dict[str, str] = {}
    min_level = LEVELS["info"]
    interactive = False
    device = "emulator-5554"
    sources: dict[str, str] = {}
    """Where device-id came from: the option, its environment variable, or a settings file."""


def main(argv: list[str]) -> NoReturn:
    record(argv)
    tokens = expand_argument_files(argv)
    if not tokens or tokens[0] in ("-h", "--help"):
        sys.stdout.write(ROOT_HELP)
        sys.exit(0 if tokens else 1)
    if tokens[0].startswith("-"):
        usage_error(ROOT_USAGE, f"no such option {tokens[0].split('=')[0]}")
    if tokens[0] not in COMMANDS:
        usage_error(ROOT_USAGE, f"no such subcommand {tokens[0]}")
    if tokens[0] in ("wrapper", "sort"):
        project_command(tokens[0], tokens[1:])
    if tokens[0] != "run":
        list_command(tokens[0], tokens[1:])
    options, rest = parse([*RUN_OPTIONS, *VERSION.hidden], tokens[1:], RUN_USAGE, subcommands=("task",))
    run_settings = resolve("run", [*RUN_OPTIONS, *VERSION.hidden], options, RUN_USAGE)
    if rest is None:
        run(run_settings)
    if VERSION.device_id:
        devices.refuse_legacy(run_settings, cli_error)
        typed = next((name for name in TRACKED if name in options), None)
        if typed is not None:
            where = "task --device-id <id>" if typed == "device-id" else f"task --{typed} ..."
            cli_error(f'--{typed} must be passed after `task`, as in `run {where} "<goal>"`.')
    task_options, positional = parse([*TASK_OPTIONS, *VERSION.hidden], rest, TASK_USAGE)
    if not positional:
        usage_error(TASK_USAGE, "missing argument <goal>")
    if len(positional) > 1:
        usage_error(TASK_USAGE, f"got unexpected extra argument ({positional[1]})")
    run_task(positional[0], resolve("run.task", [*TASK_OPTIONS, *VERSION.hidden], task_options, TASK_USAGE))


def expand_argument_files(argv: list[str]) -> list[str]:
    expanded: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            return expanded + argv[index:]
        if arg.startswith("@@"):
            expanded.append(arg[1:])
        elif arg.startswith("@"):
            expanded += shlex.split(Path(arg[1:]).read_text(encoding="utf-8"), comments=True)
        else:
            expanded.append(arg)
    return expanded


def record(argv: list[str]) -> None:
    stdin = "devnull" if os.path.samestat(os.fstat(0), os.stat(os.devnull)) else "other"
    env = {name: _sha256(os.environ[name]) if name in os.environ else None for name in sorted(API_KEY_ENV.values())}
    append_record(
        {
            "argv": argv,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "sid": os.getsid(0),
            "stdin": stdin,
            "java_opts": os.environ.get("JAVA_OPTS"),
            "env": env,
        }
    )


def append_record(entry: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_ARBIGENT_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def usage_error(usage: str, message: str) -> NoReturn:
    """Clikt's UsageError: the command's usage, a blank line, `Error: message`."""
    sys.stderr.write(f"{usage}\n\nError: {message}\n")
    sys.exit(1)


def cli_error(message: str) -> NoReturn:
    """A CliktError that is not a usage error: the message alone."""
    sys.stderr.write(f"{message}\n")
    sys.exit(1)


def jvm_exception(kind: str, message: str) -> NoReturn:
    sys.stderr.write(
        f'Exception in thread "main" {kind}: {message}\n'
        "\tat io.github.takahirom.arbigent.cli.ArbigentRunCommand.run(RunCommand.kt:216)\n"
        "\tat com.github.ajalt.clikt.core.CliktCommandKt.parse(CliktCommand.kt:502)\n"
        "\tat io.github.takahirom.arbigent.cli.MainKt.main(main.kt:30)\n"
    )
    sys.exit(1)


def parse(
    known: list[str], tokens: list[str], usage: str, subcommands: tuple[str, ...] = ()
) -> tuple[dict[str, list[str]], Any]:
    """Options (name -> values given) and what follows: the subcommand's tokens, or the positional arguments.

    For a command with subcommands, the second item is None when none was named."""
    options: dict[str, list[str]] = {}
    positional: list[str] = []
    i, options_allowed = 0, True
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if options_allowed and token == "--":
            options_allowed = False
            continue
        if options_allowed and token in ("-h", "--help"):
            sys.stdout.write(f"{usage}\n\nOptions:\n" + "".join(f"  --{o}\n" for o in known))
            sys.exit(0)
        if options_allowed and token.startswith("-") and len(token) > 1:
            name, has_value, value = token[2:].partition("=") if token.startswith("--") else (token[1:], "", "")
            canonical = SECOND_NAMES.get(name, name)
            if canonical not in known:
                usage_error(usage, f"no such option {token.split('=')[0]}")
            if canonical in FLAGS:
                if has_value:
                    usage_error(usage, f"option --{name} does not take a value")
                options[canonical] = ["true"]
                continue
            if not has_value:
                if i >= len(tokens):
                    usage_error(usage, f"option --{name} requires a value")
                value = tokens[i]
                i += 1
            values = value.split(",") if canonical in MULTIPLE else [value]
            options[canonical] = options.get(canonical, []) + values if canonical in MULTIPLE else values
        elif subcommands and not positional:
            if token not in subcommands:
                usage_error(usage, f"no such subcommand {token}")
            return options, tokens[i:]
        else:
            positional.append(token)
    return options, (positional if not subcommands else None)


def settings_sources(scope: str) -> list[dict[str, str]]:
    """Per existing settings file, in the CLI's order: its command-scoped keys, then its global keys."""
    sources: list[dict[str, str]] = []
    for name in SETTINGS_FILES:
        path = Path(".arbigent") / name
        if not path.is_file():
            continue
        try:
            flat = flatten(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            flat = {}
        sources.append({k.removeprefix(scope + "."): v for k, v in flat.items() if k.startswith(scope + ".")})
        sources.append(flat)
    return sources


def flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """YamlValueSource: maps flattened with `.`, lists joined with `,`, null as ""."""
    if isinstance(node, dict):
        result: dict[str, str] = {}
        for key, value in node.items():
            result.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return result
    if isinstance(node, list):
        return {prefix: ",".join(scalar(v) for v in node)}
    return {prefix: scalar(node)} if prefix else {}


def scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resolve(scope: str, known: list[str], given: dict[str, list[str]], usage: str) -> dict[str, Any]:
    """Every option's value: flag > environment > settings files, converted as Clikt converts it."""
    sources = settings_sources(scope)
    values: dict[str, Any] = {}
    for name in known:
        raw: list[str] | None = given.get(name)
        from_file = False
        State.sources[name] = f"--{name}"
        if raw is None and name in ENV and os.environ.get(ENV[name]):
            raw, State.sources[name] = [os.environ[ENV[name]]], ENV[name]
        if raw is None:
            found = next((source[name] for source in sources if name in source), None)
            if found is not None:
                raw, from_file = (found.split(",") if name in MULTIPLE else [found]), True
                State.sources[name] = f"the `{name}` key in a .arbigent settings file"
        if raw is not None:
            values[name] = convert(name, raw, from_file, usage)
    return values


def convert(name: str, raw: list[str], from_file: bool, usage: str) -> Any:
    value = raw[-1]
    if name in MULTIPLE:
        return raw
    if name in FLAGS:
        if not from_file:
            return True
        if value.lower() not in TRUE | FALSE:
            usage_error(usage, f"invalid value for --{name}: {value} is not a valid boolean")
        return value.lower() in TRUE
    if name in CHOICES and value not in CHOICES[name]:
        usage_error(
            usage, f"invalid value for --{name}: invalid choice: {value}. (choose from {', '.join(CHOICES[name])})"
        )
    if name in INTS:
        try:
            return int(value)
        except ValueError:
            usage_error(usage, f"invalid value for --{name}: {value} is not a valid integer")
    if name in FRACTIONS:
        try:
            number = float(value)
        except ValueError:
            usage_error(usage, f"invalid value for --{name}: {value} is not a valid floating point value")
        if not 0.0 <= number <= 1.0:
            usage_error(usage, f"invalid value for --{name}: {value} is not in the valid range of 0.0 to 1.0.")
        return number
    if name == "variables":
        try:
            return parse_variables(value)
        except ValueError as exc:
            usage_error(usage, f"invalid value for --variables: {exc}")
    if name == "shard":
        current, slash, total = value.partition("/")
        if not (slash and current.isdigit() and total.isdigit()):
            usage_error(usage, "invalid value for --shard: Invalid shard format. Use `<current>/<total>` (e.g., 1/5)")
    return value


def parse_variables(text: str) -> dict[str, str]:
    """VariableParser.parseVariables of 0.77.0."""
    if not text.strip():
        return {}
    pairs, current, quote = [], "", None
    for char in text:
        if char in "\"'" and quote is None:
            quote, current = char, current + char
        elif char == quote:
            quote, current = None, current + char
        elif char == "," and quote is None:
            if current:
                pairs.append(current)
                current = ""
        else:
            current += char
    if current:
        pairs.append(current)
    result = {}
    for pair in (p for p in pairs if p.strip()):
        if "=" not in pair:
            raise ValueError(f"Invalid variable format: '{pair}'. Expected 'key=value'")
        key, value = (part.strip() for part in pair.split("=", 1))
        if len(value) >= 2:
            if value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            elif value[0] in "\"'":
                raise ValueError(f"Unmatched quote in value for key '{key}'")
        if (
            not key
            or not (key[0].isalpha() or key[0] == "_")
            or not all(c.isalpha() or c.isdecimal() or c == "_" for c in key)
        ):
            raise ValueError(
                f"Invalid variable name: '{key}'. Variable names must start with a letter or underscore and contain "
                "only letters, numbers, and underscores."
            )
        result[key] = value
    return result


def validate_ai(settings: dict[str, Any]) -> str:
    """validateAiConfig: the key of the chosen AI type must be there. Returns the key."""
    ai_type = settings.get("ai-type", "openai")
    if ai_type == "azureopenai" and not settings.get("azure-openai-endpoint"):
        cli_error(
            "Missing Azure OpenAI endpoint. Please provide via --azure-openai-endpoint "
            "or in .arbigent/settings.local.yml"
        )
    option = f"{'azure-openai' if ai_type == 'azureopenai' else ai_type}-api-key"
    label = {"openai": "OpenAI", "gemini": "Gemini", "azureopenai": "Azure OpenAI", "anthropic": "Anthropic"}[ai_type]
    key = settings.get(option)
    if not key:
        cli_error(
            f"Missing {label} API key. Please provide via --{option}, {ENV[option]} environment variable, "
            "or in .arbigent/settings.local.yml"
        )
    return str(key)


def start(settings: dict[str, Any]) -> str:
    """The part `run` and `run task` share before they load scenarios: the superseded device option,
    AI key, log level, result dir."""
    if VERSION.device_id:
        devices.refuse_legacy(settings, cli_error)
    key = validate_ai(settings)
    State.min_level = LEVELS[settings.get("log-level", "info")]
    working_directory = settings.get("working-directory")
    State.result_dir = (Path(working_directory) if working_directory else Path()).absolute() / "arbigent-result"
    (State.result_dir / "screenshots").mkdir(parents=True, exist_ok=True)
    return key


def connect_device(settings: dict[str, Any]) -> None:
    port = str(settings.get("ios-real-device-port") or "").strip()
    if port and not port.isdigit():
        cli_error(f'--ios-real-device-port must be an integer in 1..65535 but was "{port}"')
    if port and not 1 <= int(port) <= 65535:
        cli_error(f"--ios-real-device-port must be in 1..65535 but was {int(port)}")
    if VERSION.device_id:
        State.device, why = devices.choose_new(settings, State.sources.get("device-id"), cli_error)
        log("I", f"Selected device: {State.device} ({why})")
    else:
        State.device = devices.choose_old(settings, jvm_exception)
    jdk = int(os.environ.get("FAKE_ARBIGENT_JDK") or 21)
    State.interactive = 22 <= jdk <= 24 and "-Djdk.console=java.base" not in os.environ.get("JAVA_OPTS", "").split()


def log(level: str, message: str) -> None:
    if LEVELS[{"D": "debug", "I": "info", "W": "warn", "E": "error"}[level]] < State.min_level:
        return
    if State.interactive:  # the terminal UI: a redrawn screen, no log lines
        sys.stdout.write(f"\x1b[2J\x1b[H{message}\n")
    else:
        sys.stdout.write(f"{time.strftime('%H:%M:%S', time.gmtime())} {level}: {message}\n")
    sys.stdout.flush()


def load_project(project_file: str) -> list[dict[str, Any]]:
    path = Path(project_file)
    if not path.is_file():
        jvm_exception("java.io.FileNotFoundException", f"{project_file} (No such file or directory)")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    scenarios = list(data.get("scenarios") or [])
    for scenario in scenarios:
        scenario.setdefault("id", str(uuid.uuid4()))
    return scenarios


def chain(by_id: dict[str, dict[str, Any]], scenario_id: str) -> list[str]:
    ids = [scenario_id]
    while by_id[ids[-1]].get("dependency"):
        ids.append(by_id[ids[-1]]["dependency"])
    return ids[::-1]


def select(scenarios: list[dict[str, Any]], tags: list[str], ids: list[str]) -> list[str]:
    by_id = {s["id"]: s for s in scenarios}
    if ids:
        return [s["id"] for s in scenarios if s["id"] in set(ids)]
    if tags:
        candidates = [s["id"] for s in scenarios if any(t.get("name") in set(tags) for t in s.get("tags") or [])]
        inside = {dep for c in candidates for dep in chain(by_id, c)[:-1]}
        return [c for c in candidates if c not in inside]
    depended_on = {s.get("dependency") for s in scenarios}
    return [s["id"] for s in scenarios if s["id"] not in depended_on]


def shard(selected: list[str], spec: str) -> list[str]:
    current, total = (int(part) for part in spec.split("/"))
    size, extra = divmod(len(selected), total)
    begin = (current - 1) * size + min(current - 1, extra)
    return selected[begin : begin + size + (1 if current <= extra else 0)]


def run(settings: dict[str, Any]) -> NoReturn:
    project_file = settings.get("project-file")
    if not project_file:
        cli_error(
            "Missing option '--project-file'. Please provide a project file path via command line argument "
            "or in .arbigent/settings.local.yml"
        )
    api_key = start(settings)
    scenarios = load_project(project_file)
    by_id = {s["id"]: s for s in scenarios}
    State.goals = {s["id"]: s.get("goal", "") for s in scenarios}
    tags, ids = settings.get("tags") or [], settings.get("scenario-ids") or []
    if tags and ids:
        jvm_exception(
            "java.lang.IllegalArgumentException",
            "Cannot specify both scenario IDs and tags. Please create an issue if you need this feature.",
        )
    unsharded = select(scenarios, tags, ids)
    State.selected = shard(unsharded, str(settings.get("shard") or "1/1"))
    log("D", f"[Scenario Selection] Unsharded candidates: [{', '.join(unsharded)}]")
    log("I", f"[Execution Plan] Selected scenarios for execution: [{', '.join(State.selected)}]")
    if settings.get("dry-run"):
        sys.stdout.write(f"[Execution Plan] Selected scenarios for execution: [{', '.join(State.selected)}]\n")
        sys.stdout.write("Dry run mode is enabled. Exiting without executing scenarios.\n")
        sys.exit(0)
    connect_device(settings)
    install_shutdown_hook()
    results_lines("📁 Results will be saved to:")
    prelude(api_key)
    failing = set(filter(None, os.environ.get("FAKE_ARBIGENT_FAIL", "").split(",")))
    for scenario_id in State.selected:
        State.results[scenario_id] = execute(by_id, scenario_id, failing)
    passed = all(State.results.values())
    if not State.interactive:
        log("I", "📊 All scenarios completed. Finalizing results...")
        log("I", "")
        log("I", "📋 Final Results:")
        for scenario_id in State.selected:
            ok = State.results[scenario_id]
            log("I", f"{'🟢' if ok else '🔴'} {scenario_id}: {'Success' if ok else 'Failed'}")
        log("I", "")
    summary = "🟢 All scenarios completed successfully" if passed else "🔴 Some scenarios failed"
    log("I", f"{summary}: [{', '.join(State.selected)}]")
    results_lines("📊 Results available:")
    finish(0 if passed else 1)


def run_task(goal: str, settings: dict[str, Any]) -> NoReturn:
    api_key = start(settings)
    connect_device(settings)
    State.selected = ["task"]
    State.goals = {"task": goal}
    by_id = {"task": {"id": "task", "goal": goal, "maxRetry": settings.get("max-retry", 3)}}
    install_shutdown_hook()
    results_lines("📁 Results will be saved to:")
    prelude(api_key)
    failing = set(filter(None, os.environ.get("FAKE_ARBIGENT_FAIL", "").split(",")))
    State.results["task"] = execute(by_id, "task", failing, steps=min(2, settings.get("max-step", 10)))
    passed = State.results["task"]
    log("I", "All scenarios completed successfully" if passed else "Some scenarios failed")
    results_lines("📊 Results available:")
    finish(0 if passed else 1)


def prelude(api_key: str) -> None:
    if os.environ.get("FAKE_ARBIGENT_ECHO_KEY") == "1":
        log("I", f"Using AI API key {api_key}")
    big = int(os.environ.get("FAKE_ARBIGENT_BIG_OUTPUT") or 0)
    line = f"{time.strftime('%H:%M:%S', time.gmtime())} I: 📄 " + "x" * 100 + "\n"
    for _ in range(0, big, len(line.encode())):
        sys.stdout.write(line)
    sys.stdout.flush()


def execute(by_id: dict[str, dict[str, Any]], scenario_id: str, failing: set[str], steps: int = 2) -> bool:
    log("I", f"⏺ {scenario_id} scenario has been started")
    if os.environ.get("FAKE_ARBIGENT_HANG") == "1":
        while True:
            time.sleep(3600)
    delay = float(os.environ.get("FAKE_ARBIGENT_STEP_DELAY") or 0)
    tasks = chain(by_id, scenario_id)
    doomed = next((member for member in tasks if member in failing), None)
    attempts = 1 + (int(by_id[doomed].get("maxRetry", 3)) if doomed else 0)
    history: list[dict[str, Any]] = []
    State.histories[scenario_id] = history
    for attempt in range(1, attempts + 1):
        agent_results = []
        history.append({"status": f"Attempt {attempt}", "agentResults": agent_results})
        for index, member in enumerate(tasks, 1):
            log("I", f"🔄 Running: {scenario_id} - task: {index}/{len(tasks)}")
            taken = [take_step(member, step, delay) for step in range(1, steps + 1)]
            achieved = member != doomed
            agent_results.append(agent_result(by_id[member].get("goal", ""), taken, achieved))
            if not achieved:
                log("W", f"🔁 {member}: goal not achieved, attempt {attempt}/{attempts}")
                break
            log("I", f"🟢 {member}: Execution succeeded.")
        else:
            return True
    log("E", f"java.lang.AssertionError: {doomed}: goal was not achieved")
    log("E", f"🔴 {scenario_id} scenario failed")
    return False


def take_step(member: str, step: int, delay: float) -> dict[str, Any]:
    time.sleep(delay)
    step_id = str(uuid.uuid4())
    assert State.result_dir is not None
    screenshot = State.result_dir / "screenshots" / f"{step_id}.png"
    screenshot.write_bytes(png(int(os.environ.get("FAKE_ARBIGENT_SCREENSHOT_BYTES") or 0)))
    log("D", f"step {step} of {member}: the AI decided to tap")
    return {
        "stepId": step_id,
        "summary": f"step {step} of {member}: tapped",
        "screenshotFilePath": str(screenshot),
        "apiCallJsonPath": None,
        "agentAction": "ClickWithIndex",
        "timestamp": int(time.time() * 1000),
        "cacheHit": False,
    }


def agent_result(goal: str, steps: list[dict[str, Any]], achieved: bool) -> dict[str, Any]:
    return {
        "goal": goal,
        "isGoalAchieved": achieved,
        "steps": steps,
        "deviceName": State.device,
        "endTimestamp": int(time.time() * 1000),
    }


def png(size: int) -> bytes:
    """A valid 8x16 PNG; a private ancillary chunk pads it to about `size` bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes((200, 30, 30)) * 8 for _ in range(16))
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 16, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows))
    padding = max(0, size - len(body) - 32)
    if padding:
        body += chunk(b"fiLl", b"\x00" * padding)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def results_lines(title: str) -> None:
    assert State.result_dir is not None
    log("I", "")
    log("I", title)
    log("I", f"  • YAML Results: {State.result_dir / 'result.yml'}")
    log("I", f"  • Screenshots: {State.result_dir / 'screenshots'}/")
    log("I", f"  • API Logs: {State.result_dir / 'jsonls'}/")
    log("I", f"  • HTML Report: {State.result_dir / 'report.html'}")


def install_shutdown_hook() -> None:
    def on_signal(signum: int, _frame: object) -> None:
        write_results()
        sys.stdout.flush()
        append_record({"pid": os.getpid(), "exit": 128 + signum})
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    if os.environ.get("FAKE_ARBIGENT_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, on_signal)


def finish(code: int) -> NoReturn:
    write_results()
    append_record({"pid": os.getpid(), "exit": code})
    sys.exit(code)


def write_results() -> None:
    """What Arbigent's shutdown hook writes: result.yml and report.html for the selected scenarios."""
    if State.result_dir is None:
        return
    statuses = {True: "Success", False: "Failed", None: "Idle"}
    scenarios: list[dict[str, Any]] = [
        {
            "id": scenario_id,
            "goal": State.goals.get(scenario_id, ""),
            "executionStatus": statuses[State.results.get(scenario_id)],
            "isSuccess": State.results.get(scenario_id) is True,
            "histories": State.histories.get(scenario_id, []),
        }
        for scenario_id in State.selected
    ]
    (State.result_dir / "result.yml").write_text(
        yaml.safe_dump({"scenarios": scenarios}, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    rows = "".join(f"<li>{html.escape(s['id'])}: {s['executionStatus']}</li>" for s in scenarios)
    (State.result_dir / "report.html").write_text(f"<html><body><ul>{rows}</ul></body></html>\n", encoding="utf-8")


def project_command(command: str, tokens: list[str]) -> NoReturn:
    """`wrapper` and `sort`, which take their own options."""
    usage = f"Usage: arbigent {command} [<options>]"
    if command == "wrapper":
        options, _ = parse(["version", "distribution-url", "sha256", "dir"], tokens, usage)
        commands.wrapper(VERSION.name, VERSION.wrapper_properties, {k: v[-1] for k, v in options.items()}, cli_error)
    options, _ = parse(["project-file", "log-level", "diff", "comments", "no-comments"], tokens, usage)
    settings = resolve(command, ["project-file", "log-level"], options, usage)
    project_file = settings.get("project-file")
    if not project_file:
        cli_error(
            "Missing option '--project-file'. Please provide a project file path via command line argument "
            "or in .arbigent/settings.local.yml"
        )
    commands.sort(project_file, "diff" in options, cli_error)


def list_command(command: str, tokens: list[str]) -> NoReturn:
    usage = f"Usage: arbigent {command} [<options>]"
    known = ["project-file", "working-directory", "log-level"] if command in ("scenarios", "tags") else ["project-file"]
    options, _ = parse(known, tokens, usage)
    settings = resolve(command, known, options, usage)
    project_file = settings.get("project-file")
    if not project_file:
        cli_error(
            "Missing option '--project-file'. Please provide a project file path via command line argument "
            "or in .arbigent/settings.local.yml"
        )
    scenarios = load_project(project_file)
    if command == "tags":
        names = dict.fromkeys(t.get("name") for s in scenarios for t in s.get("tags") or [])
        sys.stdout.write("".join(f"{name}\n" for name in names))
    else:
        sys.stdout.write("".join(f"{s['id']}: {s.get('goal', '')}\n" for s in scenarios))
    sys.exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
