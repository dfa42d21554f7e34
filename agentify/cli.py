"""Command line: `serve` (default), `run`, `doctor`, `eval`, `auth`, `arbigent`. Parsing and wiring only.

Exit codes (cli_errors.py): 0 ok; 1 the task or a check failed; 2 the configuration, the command
line or an environment variable is invalid; 130 `run`, `doctor` or `eval` interrupted by SIGINT or
SIGTERM. Every failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, get_args

import anyio
import anyio.abc
from loguru import logger

from agentify import __version__
from agentify.cli_errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OneLineParser,
    UsageError,
    report,
)
from agentify.config import Config, ConfigSources, LogLevel, load_sources
from agentify.errors import AgentifyError
from agentify.logging import LogSetup
from agentify.redact import Redactor
from agentify.serving import ExitWatchdog, serve_http, serve_stdio

COMMANDS = ("serve", "run", "doctor", "eval", "auth")
LEVELS = get_args(LogLevel)


def _log_level(text: str, where: str) -> str:
    """`text` as a log level name; `where` says where it came from ("AGENTIFY_LOG_LEVEL=loud")."""
    if text.upper() not in LEVELS:
        raise UsageError(f"{where} is not a log level: use one of {', '.join(LEVELS)}")
    return text.upper()


def _level_flag(text: str) -> str:
    try:
        return _log_level(text, repr(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number: use 0 to 65535")
    return port


def _parser(prog: str = "agentify") -> argparse.ArgumentParser:
    """`prog` names the subcommand in the top-level parser's errors (`agentify run: unrecognized ...`)."""
    parser = OneLineParser(prog=prog, description="One MCP server that routes tasks to your MCP tools.")
    parser.add_argument("--version", action="version", version=f"agentify {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser, prog="agentify")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="config file (default: $AGENTIFY_CONFIG, else ./agentify.json)")
        p.add_argument("--log-level", type=_level_flag, help="TRACE, DEBUG, INFO, WARNING or ERROR")

    serve = sub.add_parser("serve", help="run the gateway as an MCP server (the default)")
    common(serve)
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or http")
    serve.add_argument("--host", default="127.0.0.1", help="with --transport http: the address to bind")
    serve.add_argument("--port", type=_port, default=8765, help="with --transport http: the port (endpoint /mcp)")
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="with --transport http on a loopback address: accept clients without the bearer token",
    )
    serve.add_argument("--debug-port", type=_port, help="serve the debug console on this port")
    serve.add_argument("--debug-host", help="address the debug console binds (default 127.0.0.1: this machine only)")

    run = sub.add_parser("run", help="run one task from the terminal and print the result")
    common(run)
    run.add_argument("query", help="the task, e.g. 'list the files in docs'")
    run.add_argument("--cwd", help="working directory the task refers to (default: the current directory)")
    run.add_argument("--dry-run", action="store_true", help="only show the plan")
    run.add_argument("--json", action="store_true", help="print the MCP result as JSON")

    doctor = sub.add_parser("doctor", help="check the config, the planner and every backend")
    common(doctor)

    evaluate = sub.add_parser("eval", help="measure how well the planner routes labelled tasks (nothing is run)")
    common(evaluate)
    evaluate.add_argument("file", help='JSONL: {"query", "context"?, "expect": {"backend", "tool", "arguments"?}}')
    evaluate.add_argument("--planner", choices=["auto", "openai", "sampling", "offline"], help="planner.provider")
    evaluate.add_argument("--cwd", help="where relative context paths resolve (default: the current directory)")
    evaluate.add_argument("--shortlist", type=int, help="planner.shortlist: how many tools a model is offered")
    evaluate.add_argument(
        "--extra-tools",
        action="append",
        default=[],
        help="a JSON file of recorded backends whose tools join the catalog (may be given several times)",
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument(
        "--mode",
        choices=["plan", "search"],
        default="plan",
        help="plan: the planner's top-1 accuracy (default); search: recall at k of search_tools",
    )
    evaluate.add_argument("--limit", type=int, default=5, help="--mode search: k, how many tools an answer holds")

    auth = sub.add_parser("auth", help="authorize agentify with an OAuth backend (opens the browser)")
    common(auth)
    auth.add_argument("backend", help="the id of a backend with auth.type oauth")

    sub.add_parser("arbigent", help="the Arbigent test-runner MCP server (see `agentify arbigent --help`)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["arbigent"]:
        from agentify.arbigent.cli import main as arbigent_main

        return arbigent_main(argv[1:])
    prog = f"agentify {argv[0]}" if argv[:1] and argv[0] in COMMANDS else "agentify"
    redactor = Redactor()
    logger.remove()  # loguru's default sink is unredacted stderr at DEBUG: LogSetup adds ours
    try:
        return _main(argv, prog, redactor)
    except SystemExit:
        raise
    except BaseException as exc:  # the top-level handler: one line and an exit code, never a traceback
        return report(exc, prog, redactor.text)


def _main(argv: list[str], prog: str, redactor: Redactor) -> int:
    args = _parser(prog).parse_args(argv or ["serve"])
    command = args.command or "serve"
    env_level = os.environ.get("AGENTIFY_LOG_LEVEL")
    if env_level and not args.log_level:  # --log-level wins, so only a variable in effect must be valid
        env_level = _log_level(env_level, f"AGENTIFY_LOG_LEVEL={env_level}")
    flags: dict[str, Any] = {"logLevel": args.log_level}
    if command == "serve":
        flags |= {"debugPort": args.debug_port, "debugHost": args.debug_host}
    if command == "eval":
        planner = {"provider": args.planner, "shortlist": args.shortlist}
        flags["planner"] = {k: v for k, v in planner.items() if v is not None} or None
    logs = LogSetup(redactor)
    logs.configure(args.log_level or env_level or "INFO")
    sources = load_sources(args.config, flags)
    config = sources.resolve()
    redactor.add(config.secrets())
    # run and eval print their own output: their log is quiet unless asked for. doctor's table
    # already reports every backend's problem, so only errors are logged beside it.
    quiet = args.log_level or env_level or ("ERROR" if command == "doctor" else "WARNING")
    logs.set_level(config.log_level if command == "serve" else quiet)
    if command == "run" and not (args.log_level or env_level):
        logger.disable("agentify.tasks")  # its only warning, "task failed", is what run prints on stdout
    if command == "serve" and args.transport == "http":
        # uvicorn handles SIGTERM/SIGINT itself and shuts the app (and so every backend) down.
        from agentify.http_auth import choose_token

        token = choose_token(args.host, os.environ.get("AGENTIFY_HTTP_TOKEN"), args.no_auth)  # ConfigError: exit 2
        return anyio.run(serve_http, sources, config, logs, args.host, args.port, token)
    if command == "serve":
        exit_after = ExitWatchdog()
        return _run_async(lambda: serve_stdio(sources, config, logs, exit_after), on_signal=exit_after.signal)
    if command == "run":
        args.cwd = os.path.abspath(args.cwd or os.getcwd())
        return _one_shot("run", lambda: _run_task(sources, config, logs, args))
    if command == "eval":
        return _eval(sources, config, logs, args)
    if command == "auth":
        return _auth(config, args.backend, redactor)
    return _one_shot("doctor", lambda: _doctor(sources, config, logs))


def _one_shot(command: str, main: Callable[[], Awaitable[int]]) -> int:
    code = _run_async(main)
    if code == EXIT_INTERRUPTED:
        print(f"agentify {command}: interrupted", file=sys.stderr)
    return code


def _run_async(main: Callable[[], Awaitable[int]], on_signal: Callable[[], None] | None = None) -> int:
    """Runs `main`; SIGTERM and SIGINT cancel it, so every backend is shut down before the exit.

    Errors propagate (wrapped in exception groups by the task group): `main()` reports them."""
    result = EXIT_OK

    async def watch_signals(scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()  # before main() spawns anything: no backend can miss the shutdown
            async for signum in signals:
                name = signal.Signals(signum).name
                if scope.cancel_called:  # a second Ctrl-C while backends close: the close is bounded
                    logger.info("signal {} received: already shutting down", name)
                    continue
                logger.info("signal {} received: shutting down", name)
                if on_signal is not None:
                    on_signal()
                scope.cancel()

    async def runner() -> None:
        nonlocal result
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                await tg.start(watch_signals, scope)
                result = await main()
            if scope.cancelled_caught:
                result = EXIT_INTERRUPTED
            tg.cancel_scope.cancel()

    anyio.run(runner)
    return result


async def _run_task(sources: ConfigSources, config: Config, logs: LogSetup, args: argparse.Namespace) -> int:
    from agentify.app import open_gateway
    from agentify.results import error_result, outcome_result, plan_result

    task = {"query": args.query, "context": {"currentWorkingDirectory": args.cwd}}
    async with open_gateway(sources, config, logs, console=False) as gateway:
        try:
            outcome = await gateway.runner.run(task, execute=not args.dry_run)
            credentials = gateway.credentials
            result = plan_result(outcome, credentials) if args.dry_run else outcome_result(outcome, credentials)
        except AgentifyError as exc:
            result = error_result(exc, logs.redactor)
    if args.json:
        print(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2))
    else:
        meta = (result.meta or {}).get("agentify/plan")
        if meta:
            print(f"# {meta['backend']}.{meta['tool']} {json.dumps(meta['arguments'])} ({meta['durationMs']:.0f} ms)")
        for block in result.content:
            print(_shown(block))
    return EXIT_FAILED if result.is_error else EXIT_OK


def _shown(block: Any) -> str:
    """A content block as a terminal line: text as is, anything else named with what it points to."""
    if getattr(block, "text", None):
        return str(block.text)
    where = getattr(block, "uri", None) or getattr(getattr(block, "resource", None), "uri", None)
    size = f", {len(block.data) * 3 // 4} bytes" if isinstance(getattr(block, "data", None), str) else ""
    kind = getattr(block, "mime_type", None) or block.type
    return f"[{block.type}: {where}]" if where else f"[{block.type}: {kind}{size}]"


async def _doctor(sources: ConfigSources, config: Config, logs: LogSetup) -> int:
    from agentify.app import open_gateway

    print(f"agentify {__version__}")
    print(f"config: {sources.file_path or '(no config file: defaults and environment only)'}")
    async with open_gateway(sources, config, logs, console=False) as gateway:
        await gateway.manager.wait_all_settled()
        choice = gateway.planners.describe()
        statuses = gateway.manager.statuses()
    print(f"planner: {choice.reason}")
    width = max([len(s.id) for s in statuses] + [7])
    print(f"\n{'BACKEND':<{width}}  {'STATE':<10}  {'TOOLS':>5}  DETAIL")
    broken = choice.name is None
    for status, spec in zip(statuses, config.backends, strict=True):
        state = status.state.value if spec.enabled else "disabled"
        if spec.enabled and status.last_error:
            broken = True
        detail = status.last_error or ", ".join(status.tools)
        if status.url:
            detail = f"{status.url}: {detail}" if detail else status.url
        print(f"{status.id:<{width}}  {state:<10}  {len(status.tools):>5}  {logs.redactor.text(detail)}")
    if not statuses:
        print("(no backends configured: see backends.example.json)")
        broken = True
    print("\nresult: " + ("problems found (see above)" if broken else "all good"))
    return EXIT_FAILED if broken else EXIT_OK


def _auth(config: Config, backend_id: str, redactor: Redactor) -> int:
    from agentify.backends.login import LoginFailed, login

    spec = next((b for b in config.backends if b.id == backend_id), None)
    if spec is None or not spec.oauth:
        oauth = [b.id for b in config.backends if b.oauth]
        print(
            f"agentify auth: {backend_id!r} is not a backend with auth.type oauth in the config "
            f"(OAuth backends: {', '.join(oauth) or 'none'})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    count = -1
    problem = ""

    async def authorize() -> int:
        nonlocal count, problem
        try:
            count = await login(spec)
        except Exception as exc:  # top level of the command: every failure becomes one readable line
            problem = _login_problem(exc, LoginFailed)
            return EXIT_FAILED
        return EXIT_OK

    code = _run_async(authorize)
    if count >= 0:
        print(
            f"agentify auth: {backend_id} is authorized ({count} tools); running gateways pick it up on the next call"
        )
    elif problem:
        print(f"agentify auth: {redactor.text(problem)}", file=sys.stderr)
    return code


def _login_problem(exc: BaseException, expected: type[Exception]) -> str:
    leaves = [exc]
    while any(isinstance(e, BaseExceptionGroup) for e in leaves):
        leaves = [i for e in leaves for i in (e.exceptions if isinstance(e, BaseExceptionGroup) else [e])]
    known = next((e for e in leaves if isinstance(e, expected)), None)
    if known is not None:
        return str(known)
    first = leaves[0]
    return f"the authorization failed: {type(first).__name__}: {first}. Check the url and try again."


def _eval(sources: ConfigSources, config: Config, logs: LogSetup, args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentify.app import open_gateway
    from agentify.eval import EvalFileError, Report, evaluate_gateway, load_backends, load_cases
    from agentify.search_eval import SearchReport, evaluate_gateway_search

    try:
        cases = load_cases(Path(args.file), os.path.abspath(args.cwd or os.getcwd()))
        extra = [backend for path in args.extra_tools for backend in load_backends(Path(path))]
    except EvalFileError as exc:
        raise UsageError(str(exc)) from None
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    report: Report | SearchReport | None = None

    async def evaluate() -> int:
        nonlocal report
        try:
            async with open_gateway(sources, config, logs, console=False) as gateway:
                if args.mode == "search":
                    report = await evaluate_gateway_search(gateway, cases, extra, args.limit)
                else:
                    report = await evaluate_gateway(gateway, cases, extra)
        except* EvalFileError as group:  # raised inside the gateway's task group, so wrapped
            raise UsageError(str(group.exceptions[0])) from None
        return EXIT_OK

    code = _one_shot("eval", evaluate)
    if report is None:  # interrupted by a signal
        return code
    print(json.dumps(report.as_json(), indent=2) if args.json else "\n".join(report.lines()))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
