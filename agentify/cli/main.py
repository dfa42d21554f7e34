"""Command line: `serve` (default), `run`, `doctor`, `eval`, `auth`, `token`, `vault`, `pins`, `connect`, `audit`,
`arbigent`. Wiring only.

Exit codes (errors.py): 0 ok; 1 the task or a check failed; 2 the configuration, the command
line or an environment variable is invalid; 130 `run`, `doctor` or `eval` interrupted by SIGINT or
SIGTERM. Every failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from loguru import logger

from agentify._common.logging import LogSetup
from agentify.cli.audit import ACTIONS as AUDIT_ACTIONS
from agentify.cli.config_file import find_config
from agentify.cli.errors import report
from agentify.cli.output import note
from agentify.cli.parser import COMMANDS, TOKEN_ACTIONS, build_parser, log_level
from agentify.security.redact import Redactor

if TYPE_CHECKING:
    from agentify.gateway.services import Boot


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["arbigent"]:
        from agentify.arbigent.cli import main as arbigent_main

        return arbigent_main(argv[1:])
    prog = f"agentify {argv[0]}" if argv[:1] and argv[0] in COMMANDS else "agentify"
    if argv[:1] in (["token"], ["audit"]) and argv[1:2] and argv[1] in (*TOKEN_ACTIONS, *AUDIT_ACTIONS):
        prog += f" {argv[1]}"  # "agentify token: 'x'" would read as a token assignment to the redactor
    redactor = Redactor()
    logger.remove()  # loguru's default sink is unredacted stderr at DEBUG: LogSetup adds ours
    try:
        return _main(argv, prog, redactor)
    except SystemExit:
        raise
    except BaseException as exc:  # the top-level handler: one line and an exit code, never a traceback
        return report(exc, prog, redactor.text)


def _refuse_inside_a_gateway() -> None:
    """A gateway started (through any wrapper) by a gateway would start itself again, without end."""
    from agentify._common.errors import StartFailed
    from agentify.config.itself import PARENT_VARIABLE

    parent = os.environ.get(PARENT_VARIABLE)
    if parent:
        raise StartFailed(
            f"error: this agentify was started as a backend of the agentify gateway with pid {parent} "
            "(its config, or a script it runs, starts agentify again), so it does not start: a gateway "
            "inside its own gateway would start itself without end. Remove that backend from the config "
            "(`agentify doctor` in a terminal shows which one fails)."
        )


def _main(argv: list[str], prog: str, redactor: Redactor) -> int:
    args = build_parser(prog).parse_args(argv or ["serve"])  # --help and --version exit here, before the imports
    if args.command == "connect":  # edits files: no config to load, no logging to set up
        from agentify.cli.connect import connect

        return connect(args)
    if args.command == "audit":  # reads files: no config, no logging
        from agentify.cli.audit import audit_command

        return audit_command(args)
    from agentify.config import load_sources
    from agentify.gateway.services import Boot
    from agentify.telemetry.setup import open_telemetry

    command = args.command or "serve"
    if command == "token":  # no gateway, no logging: it reads and writes one file
        from agentify.cli.tokens import token_command

        return token_command(args)
    if command == "vault":  # no gateway: it drops one person's records
        from agentify.cli.vault import vault_command

        return vault_command(args)
    if command == "pins":  # no gateway, no logging: it reads and writes the pin store
        from agentify.cli.pins import pins_command

        return pins_command(args)
    if command != "auth":
        _refuse_inside_a_gateway()
    env_level = os.environ.get("AGENTIFY_LOG_LEVEL")
    if env_level and not args.log_level:  # --log-level wins, so only a variable in effect must be valid
        env_level = log_level(env_level, f"AGENTIFY_LOG_LEVEL={env_level}")
    flags: dict[str, Any] = {"logLevel": args.log_level}
    if command == "serve":
        flags |= {"debugPort": args.debug_port, "debugHost": args.debug_host}
    if command == "eval":
        planner = {"provider": args.planner, "shortlist": args.shortlist}
        flags["planner"] = {k: v for k, v in planner.items() if v is not None} or None
    logs = LogSetup(redactor)
    logs.configure(args.log_level or env_level or "INFO")
    found = find_config(args.config)
    if found.message:
        note(f"{prog}: {found.message}")
    sources = load_sources(found.path, flags)
    config = sources.resolve()
    if config.server.access is not None:  # a bad policy file stops every command here, naming its line
        from agentify.team.access import AccessGate

        AccessGate(config.server.access)
    redactor.add(config.secrets())
    # run and eval print their own output: their log is quiet unless asked for. doctor's table
    # already reports every backend's problem, so only errors are logged beside it.
    quiet = args.log_level or env_level or ("ERROR" if command == "doctor" else "WARNING")
    logs.set_level(config.log_level if command == "serve" else quiet)
    if command == "run" and not (args.log_level or env_level):
        logger.disable("agentify.gateway.tasks")  # its only warning, "task failed", is what run prints on stdout
        logger.disable("agentify.backends.endings")  # a backend that did not start: run says so in one line
    serving = {"stdio": "pipe", "http": "tcp"}.get(args.transport) if command == "serve" else None
    audited = serving is not None and config.server.audit is not None
    telemetry = open_telemetry(redactor, capture_content=config.otel.capture_content, transport=serving, audit=audited)
    telemetry.install()
    try:
        return _command(args, command, Boot(sources, config, logs, redactor, telemetry))
    finally:
        telemetry.shutdown()


def _command(args: Any, command: str, boot: Boot) -> int:
    from agentify.cli import commands
    from agentify.cli.running import one_shot
    from agentify.cli.serve import serve_http_command, serve_stdio_command

    config, redactor = boot.config, boot.redactor
    if command == "serve" and args.transport == "http":
        # uvicorn handles SIGTERM/SIGINT itself and shuts the app (and so every backend) down.
        from agentify.errors import ConfigError
        from agentify.team.http_auth import BadToken, choose_token

        token = None
        try:
            if config.server.auth.type == "token":
                token = choose_token(args.host, os.environ.get("AGENTIFY_HTTP_TOKEN"), args.no_auth)
            elif args.no_auth:
                raise BadToken(f"--no-auth contradicts server.auth type {config.server.auth.type}: drop one of them")
        except BadToken as exc:
            raise ConfigError(str(exc)) from None  # exit 2
        return serve_http_command(boot, args.host, args.port, token)
    if command == "serve":
        return serve_stdio_command(boot)
    if command == "run":
        args.cwd = os.path.abspath(args.cwd or os.getcwd())
        return one_shot("run", lambda: commands.run_task(boot, args))
    if command == "eval":
        return commands.evaluate(boot, args)
    if command == "auth":
        return commands.auth(config, args.backend, redactor)
    return one_shot("doctor", lambda: commands.doctor(boot))
