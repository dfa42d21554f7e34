"""`agentify arbigent`: argument parsing, start-up checks and logging, then the MCP server on stdio.

Every start-up check fails with one clear line on stderr and exit code 1 before anything is served
(argument errors: argparse's usage message and exit code 2). The MCP SDK is imported only once the
checks passed, so a misconfiguration is reported in a fraction of a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import anyio
from loguru import logger

from agentify._common.errors import ConfigError
from agentify._common.exit import leave_now
from agentify._common.logging import LogSetup
from agentify._common.signals import exit_status, stop_signals
from agentify.arbigent.catalog import ProjectTools, build_catalog
from agentify.arbigent.devices import DeviceChoiceError, check_device_id, device_flag
from agentify.arbigent.errors import StartupError
from agentify.arbigent.executable import Arbigent, find_arbigent
from agentify.arbigent.locks import private_lock_dir
from agentify.arbigent.options import API_KEY_ENV
from agentify.arbigent.project import load_project
from agentify.arbigent.runs import DEFAULT_GRACE_SECONDS, DEFAULT_TIMEOUT_SECONDS, RunnerConfig, Runs
from agentify.arbigent.settings import SETTINGS_FILES, RunSettings, api_key_option, load_settings, stray_settings
from agentify.security.redact import Redactor

GRACE_ENV = "AGENTIFY_ARBIGENT_GRACE_SECONDS"
"""Seconds between SIGTERM and SIGKILL when a run is stopped (default 10); tests shorten it."""
DEVICE_ENV = "AGENTIFY_ARBIGENT_DEVICE_ID"
VERSION_ENV = "AGENTIFY_ARBIGENT_VERSION"
LOG_LEVELS = ("debug", "info", "warning", "error")
_LOG_FORMAT = "{time:HH:mm:ss.SSS} {level: <7} arbigent-runner | {message}"


def main(argv: list[str]) -> int:
    """Runs `agentify arbigent ARGS`; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage and the error (or --help) already
        return exc.code if isinstance(exc.code, int) else 2
    redactor = Redactor(os.environ.get(name, "") for name in API_KEY_ENV.values())
    LogSetup(redactor, text_format=_LOG_FORMAT).configure(args.log_level)
    try:
        config, catalog, arbigent = startup(args, redactor)
    except (StartupError, ConfigError) as exc:
        sys.stderr.write(f"agentify arbigent: error: {exc}\n")
        return 1
    anyio.run(_serve, config, catalog, redactor, arbigent.describe())
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentify arbigent",
        description="MCP server (stdio) that runs the Arbigent scenarios of one project through the arbigent CLI.",
    )
    parser.add_argument("--project", required=True, help="the Arbigent project YAML (arbigent-project.yaml)")
    parser.add_argument(
        "--config",
        required=True,
        help="settings YAML read like arbigent's own settings file, turned into options (API keys go to env)",
    )
    parser.add_argument(
        "--arbigent-bin-path",
        help="the arbigent executable, or a project's arbigentw (default: ./arbigentw beside the project file, "
        "else `arbigent` on PATH)",
    )
    parser.add_argument(
        "--arbigent-version",
        default=os.environ.get(VERSION_ENV),
        help=f"the CLI's version, when it cannot be read from its installation (or {VERSION_ENV})",
    )
    parser.add_argument(
        "--device-id",
        default=os.environ.get(DEVICE_ENV),
        help=f"the device every run uses unless a call names one (or {DEVICE_ENV}; default: the only connected one)",
    )
    parser.add_argument("--working-directory", help="where arbigent runs (default: the project file's directory)")
    parser.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_SECONDS, help="seconds per run (default: 1800)"
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        default=_default_log_level(),
        help="stderr log level (default: info, or AGENTIFY_LOG_LEVEL)",
    )
    return parser


def _default_log_level() -> str:
    """AGENTIFY_LOG_LEVEL, as the gateway passes it on, or info when it is not a level this runner knows."""
    level = os.environ.get("AGENTIFY_LOG_LEVEL", "info").lower()
    level = {"warn": "warning", "critical": "error"}.get(level, level)
    return level if level in LOG_LEVELS else "info"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def startup(args: argparse.Namespace, redactor: Redactor) -> tuple[RunnerConfig, ProjectTools, Arbigent]:
    """Every check that must pass before serving.

    Raises:
        StartupError, ConfigError: with the message to print.
    """
    # Absolute but not resolved: a symlinked project file is followed at every read, so re-pointing it counts.
    project_file = Path(os.path.abspath(Path(args.project).expanduser()))
    catalog = build_catalog(load_project(project_file))
    arbigent = find_arbigent(args.arbigent_bin_path, project_file.parent, args.arbigent_version)
    if arbigent.version is None:
        logger.warning(
            "cannot tell which version {} is (no arbigentw.properties, no lib/arbigent-cli-<version>.jar): "
            "using the options of the newest supported CLI ({}); pass --arbigent-version if it is older",
            arbigent.path,
            arbigent.options.label,
        )
    settings = load_settings(Path(args.config).expanduser(), arbigent.options)
    redactor.add(settings.secrets)
    device_id = _device_id(args.device_id, arbigent, settings)
    working_directory = Path(args.working_directory).expanduser() if args.working_directory else project_file.parent
    working_directory = working_directory.resolve()
    if not working_directory.is_dir():
        raise StartupError(f"working directory does not exist or is not a directory: {working_directory}")
    problem = stray_settings(working_directory, arbigent.options)
    if problem is not None:
        raise StartupError(problem)
    config = RunnerConfig(
        binary=arbigent.path,
        project_file=project_file,
        working_directory=working_directory,
        settings=settings,
        cli=arbigent.options,
        device_id=device_id,
        lock_dir=private_lock_dir(),
        timeout=args.timeout,
        grace=_grace_seconds(),
    )
    _warn_about(settings, working_directory)
    logger.info(
        "serving the tools of {} (arbigent: {}; working directory: {}{})",
        project_file,
        arbigent.describe(),
        working_directory,
        f"; device: {device_id}" if device_id else "",
    )
    return config, catalog, arbigent


def _device_id(given: str | None, arbigent: Arbigent, settings: RunSettings) -> str | None:
    """The runner's --device-id, checked against both commands' --os for this CLI.

    Raises:
        StartupError: not a device id, or this CLI cannot name a device for the configured OS.
    """
    if given is None or not given.strip():
        return None
    try:
        device_id = check_device_id(given)
        for command in ("run", "task"):
            device_flag(arbigent.options, settings.for_command(command).value_of("os") or "android", device_id)
    except DeviceChoiceError as exc:
        raise StartupError(f"--device-id: {exc}") from None
    return device_id


def _grace_seconds() -> float:
    raw = os.environ.get(GRACE_ENV)
    if raw is None:
        return DEFAULT_GRACE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise StartupError(f"{GRACE_ENV}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise StartupError(f"{GRACE_ENV} must not be negative, got {raw}")
    return value


def _warn_about(settings: RunSettings, working_directory: Path) -> None:
    for warning in settings.warnings:
        logger.warning("{}", warning)
    has_settings_file = any((working_directory / ".arbigent" / name).exists() for name in SETTINGS_FILES)
    if has_settings_file:
        return
    for command in ("run", "task"):
        ai_type = settings.for_command(command).value_of("ai-type") or "openai"
        env_name = API_KEY_ENV[api_key_option(ai_type) or "openai-api-key"]
        if not settings.for_command(command).env.get(env_name) and not os.environ.get(env_name):
            what = "runs" if command == "run" else "run-arbigent-task calls"
            logger.warning(
                "no API key for ai-type {}: {} will fail until {} is set or the config has {}",
                ai_type,
                what,
                env_name,
                api_key_option(ai_type),
            )


async def _serve(config: RunnerConfig, catalog: ProjectTools, redactor: Redactor, cli: str) -> None:
    """Serves over stdin/stdout until EOF, SIGTERM or SIGINT.

    A signal sets `kill_now`, so a run in progress skips its grace period: whoever sent the signal
    (often an MCP client closing down, which kills this process two seconds later) will not wait.
    """
    from mcp.server.stdio import stdio_server

    from agentify.arbigent.server import ArbigentServer

    kill_now = anyio.Event()
    app = ArbigentServer(catalog=catalog, runs=Runs(config, redactor, kill_now), redactor=redactor, cli=cli)
    received: list[int] = []
    async with stdio_server() as (read_stream, write_stream):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, tg.cancel_scope, kill_now, received)
            await app.serve(read_stream, write_stream)
            tg.cancel_scope.cancel()
        if received:
            # Every run has been stopped by now. Leaving stdio_server would wait for its stdin
            # reader thread, which is blocked in a read that no cancellation interrupts.
            leave_now(exit_status(received[0]))


async def _stop_on_signal(scope: anyio.CancelScope, kill_now: anyio.Event, received: list[int]) -> None:
    with stop_signals() as signals:
        async for signum in signals:
            logger.info("received {}; stopping runs and shutting down", signum.name)
            received.append(signum)
            kill_now.set()
            scope.cancel()
            return
