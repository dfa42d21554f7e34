"""A stand-in for the `arbigent` CLI (release 0.77.0) that behaves like it where the runner can tell.

Follows docs/arbigent-cli-facts.md (Arbigent 0.77.0): the `run` subcommand with the real option names
(`--name=value` and `--name value`), `@file` argument files, settings files in `.arbigent/` of the
CWD, usage errors (`Error: no such option --x`, exit 1), the API key check, the selection rules, the
`HH:MM:SS L: message` lines, the Final Results block, result.yml and report.html under
`<working dir>/arbigent-result/`, and SIGTERM/SIGINT writing results before exiting 143/130.

Test switches (environment):
  FAKE_ARBIGENT_RECORD=<file>        append a JSON line when started: {"argv", "cwd", "pid", "ppid", "pgid", "sid",
                                     "stdin": "devnull"|"other", "env": {API key env var: sha256 of it or null}},
                                     and one when a run ends: {"pid", "exit": <code>}
  FAKE_ARBIGENT_FAIL=<id,id>         these scenarios fail (and so does every scenario whose chain holds one)
  FAKE_ARBIGENT_STEP_DELAY=<s>       sleep before each step (default 0)
  FAKE_ARBIGENT_HANG=1               hang after the first scenario started (until a signal)
  FAKE_ARBIGENT_IGNORE_SIGTERM=1     ignore SIGTERM (only SIGKILL stops it)
  FAKE_ARBIGENT_BIG_OUTPUT=<bytes>   print that many bytes of extra log lines before the first scenario
  FAKE_ARBIGENT_ECHO_KEY=1           print the API key in use (to test redaction)
  FAKE_ARBIGENT_NO_DEVICE=1          fail like a machine without a device ("No available device found")
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import yaml

VALUE_OPTIONS = {
    "--project-file",
    "--ai-type",
    "--os",
    "--tags",
    "--scenario-ids",
    "--shard",
    "--variables",
    "--working-directory",
    "--log-level",
    "--log-file",
    "--path",
    "--openai-endpoint",
    "--openai-model-name",
    "--openai-api-key",
    "--gemini-endpoint",
    "--gemini-model-name",
    "--gemini-api-key",
    "--azure-openai-endpoint",
    "--azure-openai-api-version",
    "--azure-openai-model-name",
    "--azure-openai-api-key",
}
FLAG_OPTIONS = {"--dry-run", "--ai-api-logging"}
REPEATABLE = {"--tags", "--scenario-ids"}
API_KEY_ENV = {"OPENAI_API_KEY", "GEMINI_API_KEY", "AZURE_OPENAI_API_KEY"}
SETTINGS_FILES = ("settings.local.yml", "settings.local.yaml", "settings.yml", "settings.yaml")
LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3}
COMMANDS = ("run", "scenarios", "tags", "graph", "instruction", "guide")

ROOT_HELP = """Usage: arbigent [<options>] <command> [<args>]...

Options:
  -h, --help  Show this message and exit

Commands:
  run          Execute test scenarios
  scenarios    List scenarios in the project
  tags         List tags in the project
  graph        Show the scenario dependency graph
  instruction  Print instructions for AI agents
  guide        Show the getting started guide
"""
RUN_USAGE = "Usage: arbigent run [<options>]"


class State:
    """What the shutdown hook needs: where results go and what has run so far."""

    result_dir: Path | None = None
    selected: list[str] = []
    results: dict[str, bool] = {}
    goals: dict[str, str] = {}
    min_level = LEVELS["info"]


def main(argv: list[str]) -> NoReturn:
    argv = expand_argument_files(argv)
    record(argv)
    if not argv:
        sys.stdout.write(ROOT_HELP)
        usage_error("Usage: arbigent [<options>] <command> [<args>]...", "missing command")
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(ROOT_HELP)
        sys.exit(0)
    if argv[0].startswith("-"):
        usage_error("Usage: arbigent [<options>] <command> [<args>]...", f"no such option {argv[0].split('=')[0]}")
    if argv[0] not in COMMANDS:
        usage_error("Usage: arbigent [<options>] <command> [<args>]...", f"no such subcommand {argv[0]}")
    options = parse_options(argv[0], argv[1:])
    if argv[0] == "run":
        run(options)
    list_command(argv[0], options)


def expand_argument_files(argv: list[str]) -> list[str]:
    expanded: list[str] = []
    for arg in argv:
        if arg.startswith("@"):
            expanded += shlex.split(Path(arg[1:]).read_text(encoding="utf-8"), comments=True)
        else:
            expanded.append(arg)
    return expanded


def record(argv: list[str]) -> None:
    stdin = "devnull" if os.path.samestat(os.fstat(0), os.stat(os.devnull)) else "other"
    env = {name: _sha256(os.environ[name]) if name in os.environ else None for name in sorted(API_KEY_ENV)}
    append_record(
        {
            "argv": argv,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "sid": os.getsid(0),
            "stdin": stdin,
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
    sys.stderr.write(f"{usage}\n\nError: {message}\n")
    sys.exit(1)


def cli_error(message: str) -> NoReturn:
    sys.stderr.write(f"Error: {message}\n")
    sys.exit(1)


def jvm_exception(kind: str, message: str) -> NoReturn:
    sys.stderr.write(
        f'Exception in thread "main" {kind}: {message}\n'
        "\tat io.github.takahirom.arbigent.cli.ArbigentRunCommand.run(RunCommand.kt:216)\n"
        "\tat com.github.ajalt.clikt.core.CliktCommandKt.parse(CliktCommand.kt:502)\n"
        "\tat io.github.takahirom.arbigent.cli.MainKt.main(main.kt:30)\n"
    )
    sys.exit(1)


def parse_options(command: str, args: list[str]) -> dict[str, Any]:
    usage = f"Usage: arbigent {command} [<options>]"
    options: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(f"{usage}\n\nOptions:\n" + "".join(f"  {o} <value>\n" for o in sorted(VALUE_OPTIONS)))
            sys.stdout.write(
                "".join(f"  {o}\n" for o in sorted(FLAG_OPTIONS)) + "  -h, --help  Show this message and exit\n"
            )
            sys.exit(0)
        if not arg.startswith("--"):
            usage_error(usage, f"got unexpected extra argument ({arg})")
        name, has_value, value = arg.partition("=")
        if name in FLAG_OPTIONS:
            if has_value:
                usage_error(usage, f"option {name} does not take a value")
            options[name] = True
        elif name in VALUE_OPTIONS or name.startswith("--ios-"):
            if not has_value:
                i += 1
                if i >= len(args):
                    usage_error(usage, f"option {name} requires a value")
                value = args[i]
            if name in REPEATABLE:
                options.setdefault(name, []).extend(value.split(","))
            else:
                options[name] = value
        else:
            usage_error(usage, f"no such option {name}")
        i += 1
    return options


def settings_file_options(command: str) -> dict[str, Any]:
    """Options from the first `.arbigent/settings*` file in the CWD: top level, then `<command>:` overriding."""
    for name in SETTINGS_FILES:
        path = Path(".arbigent") / name
        if path.exists():
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            merged = {k: v for k, v in data.items() if not isinstance(v, dict)}
            if isinstance(data.get(command), dict):
                merged.update(data[command])
            return {f"--{k}": v for k, v in merged.items()}
    return {}


def effective(options: dict[str, Any], settings: dict[str, Any], name: str, env: str | None = None) -> Any:
    """Flag > env > settings file."""
    if name in options:
        return options[name]
    if env and os.environ.get(env):
        return os.environ[env]
    value = settings.get(name)
    if name in REPEATABLE and isinstance(value, str):
        return value.split(",")
    if isinstance(value, list) and name not in REPEATABLE:
        return ",".join(str(v) for v in value)
    return value


def log(level: str, message: str) -> None:
    if LEVELS[{"D": "debug", "I": "info", "W": "warn", "E": "error"}[level]] < State.min_level:
        return
    sys.stdout.write(f"{time.strftime('%H:%M:%S', time.gmtime())} {level}: {message}\n")
    sys.stdout.flush()


def load_project(project_file: str) -> list[dict[str, Any]]:
    path = Path(project_file)
    if not path.is_file():
        jvm_exception("java.io.FileNotFoundException", f"{project_file} (No such file or directory)")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data.get("scenarios") or [])


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
    start = (current - 1) * size + min(current - 1, extra)
    return selected[start : start + size + (1 if current <= extra else 0)]


def run(options: dict[str, Any]) -> NoReturn:
    settings = settings_file_options("run")
    project_file = effective(options, settings, "--project-file")
    if not project_file:
        cli_error(
            "Missing option '--project-file'. Please provide a project file path via command line argument "
            "or in .arbigent/settings.local.yml"
        )
    ai_type = effective(options, settings, "--ai-type") or "openai"
    key_option, key_env, label = {
        "openai": ("--openai-api-key", "OPENAI_API_KEY", "OpenAI"),
        "gemini": ("--gemini-api-key", "GEMINI_API_KEY", "Gemini"),
        "azureopenai": ("--azure-openai-api-key", "AZURE_OPENAI_API_KEY", "Azure OpenAI"),
    }.get(ai_type) or usage_error(
        RUN_USAGE, f"invalid value for --ai-type: invalid choice: {ai_type}. (choose from openai, gemini, azureopenai)"
    )
    api_key = effective(options, settings, key_option, key_env)
    if not api_key:
        cli_error(
            f"Missing {label} API key. Please provide via {key_option}, {key_env} environment variable, "
            "or in .arbigent/settings.local.yml"
        )
    level = str(effective(options, settings, "--log-level") or "info").lower()
    if level not in LEVELS:
        jvm_exception(
            "java.lang.IllegalArgumentException",
            "Invalid log level. The log level should be one of debug, info, warn, error",
        )
    State.min_level = LEVELS[level]
    working_directory = effective(options, settings, "--working-directory")
    State.result_dir = (Path(working_directory) if working_directory else Path()).absolute() / "arbigent-result"
    State.result_dir.mkdir(parents=True, exist_ok=True)

    scenarios = load_project(project_file)
    by_id = {s["id"]: s for s in scenarios}
    State.goals = {s["id"]: s.get("goal", "") for s in scenarios}
    tags = effective(options, settings, "--tags") or []
    ids = effective(options, settings, "--scenario-ids") or []
    if tags and ids:
        jvm_exception(
            "java.lang.IllegalArgumentException",
            "Cannot specify both scenario IDs and tags. Please create an issue if you need this feature.",
        )
    unsharded = select(scenarios, tags, ids)
    State.selected = shard(unsharded, str(effective(options, settings, "--shard") or "1/1"))
    log("D", f"[Scenario Selection] Unsharded candidates: [{', '.join(unsharded)}]")
    log("I", f"[Execution Plan] Selected scenarios for execution: [{', '.join(State.selected)}]")
    dry_run = bool(effective(options, settings, "--dry-run"))
    if not dry_run and os.environ.get("FAKE_ARBIGENT_NO_DEVICE") == "1":
        jvm_exception("java.lang.IllegalArgumentException", "No available device found")
    install_shutdown_hook()
    results_lines("📁 Results will be saved to:")
    if dry_run:
        log("I", "🧪 Dry run mode is enabled. Exiting without executing scenarios.")
        finish(0)
    if os.environ.get("FAKE_ARBIGENT_ECHO_KEY") == "1":
        log("I", f"Using AI API key {api_key}")
    big = int(os.environ.get("FAKE_ARBIGENT_BIG_OUTPUT") or 0)
    if big:
        print_filler(big)
    failing = set(filter(None, os.environ.get("FAKE_ARBIGENT_FAIL", "").split(",")))
    delay = float(os.environ.get("FAKE_ARBIGENT_STEP_DELAY") or 0)
    for scenario_id in State.selected:
        State.results[scenario_id] = execute(by_id, scenario_id, failing, delay)
    log("I", "📊 All scenarios completed. Finalizing results...")
    log("I", "")
    log("I", "📋 Final Results:")
    for scenario_id in State.selected:
        ok = State.results[scenario_id]
        log("I", f"{'🟢' if ok else '🔴'} {scenario_id}: {'Success' if ok else 'Failed'}")
    log("I", "")
    passed = all(State.results.values())
    summary = "🟢 All scenarios completed successfully" if passed else "🔴 Some scenarios failed"
    log("I", f"{summary}: [{', '.join(State.selected)}]")
    results_lines("📊 Results available:")
    finish(0 if passed else 1)


def execute(by_id: dict[str, dict[str, Any]], scenario_id: str, failing: set[str], delay: float) -> bool:
    log("I", f"⏺ {scenario_id} scenario has been started")
    if os.environ.get("FAKE_ARBIGENT_HANG") == "1":
        while True:
            time.sleep(3600)
    tasks = chain(by_id, scenario_id)
    for index, member in enumerate(tasks, 1):
        log("I", f"🔄 Running: {scenario_id} - task: {index}/{len(tasks)}")
        for step in (1, 2):
            time.sleep(delay)
            log("D", f"step {step} of {member}: the AI decided to tap")
        if member in failing:
            retries = int(by_id[member].get("maxRetry", 3))
            for attempt in range(1, retries + 1):
                log("W", f"🔁 {member}: goal not achieved, retry {attempt}/{retries}")
            log("E", f"java.lang.AssertionError: {member}: goal was not achieved")
            log("E", f"🔴 {scenario_id} scenario failed")
            return False
        log("I", f"🟢 {member}: Execution succeeded.")
    return True


def print_filler(size: int) -> None:
    line = f"{time.strftime('%H:%M:%S', time.gmtime())} I: 📄 " + "x" * 100 + "\n"
    written = 0
    while written < size:
        sys.stdout.write(line)
        written += len(line.encode())
    sys.stdout.flush()


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
            "histories": [],
        }
        for scenario_id in State.selected
    ]
    (State.result_dir / "result.yml").write_text(
        yaml.safe_dump({"scenarios": scenarios}, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    rows = "".join(f"<li>{html.escape(s['id'])}: {s['executionStatus']}</li>" for s in scenarios)
    (State.result_dir / "report.html").write_text(f"<html><body><ul>{rows}</ul></body></html>\n", encoding="utf-8")


def list_command(command: str, options: dict[str, Any]) -> NoReturn:
    settings = settings_file_options(command)
    project_file = effective(options, settings, "--project-file")
    if not project_file:
        cli_error("Missing option '--project-file'.")
    scenarios = load_project(project_file)
    if command == "tags":
        names = dict.fromkeys(t.get("name") for s in scenarios for t in s.get("tags") or [])
        sys.stdout.write("".join(f"{name}\n" for name in names))
    else:
        sys.stdout.write("".join(f"{s['id']}: {s.get('goal', '')}\n" for s in scenarios))
    sys.exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
