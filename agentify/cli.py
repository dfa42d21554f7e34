"""Command line: `serve` (default), `run`, `doctor`, `eval`, `arbigent`. Parsing and wiring only.

Exit codes: 0 ok; 1 the task or a check failed; 2 the configuration or the command line is invalid;
130 `run`, `doctor` or `eval` interrupted by SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from loguru import logger

from agentify import __version__
from agentify.config import Config, ConfigSources, load_sources
from agentify.errors import AgentifyError, ConfigError
from agentify.logging import LogSetup
from agentify.redact import Redactor

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentify", description="One MCP server that routes tasks to your MCP tools.")
    parser.add_argument("--version", action="version", version=f"agentify {__version__}")
    sub = parser.add_subparsers(dest="command")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="config file (default: $AGENTIFY_CONFIG, else ./agentify.json)")
        p.add_argument("--log-level", help="TRACE, DEBUG, INFO, WARNING or ERROR")

    serve = sub.add_parser("serve", help="run the gateway as an MCP server (the default)")
    common(serve)
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or http")
    serve.add_argument("--host", default="127.0.0.1", help="with --transport http: the address to bind")
    serve.add_argument("--port", type=int, default=8765, help="with --transport http: the port (endpoint /mcp)")
    serve.add_argument("--debug-port", type=int, help="serve the debug console on this port")
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

    sub.add_parser("arbigent", help="the Arbigent test-runner MCP server (see `agentify arbigent --help`)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["arbigent"]:
        from agentify.arbigent.cli import main as arbigent_main

        return arbigent_main(argv[1:])
    args = _parser().parse_args(argv or ["serve"])
    command = args.command or "serve"
    flags: dict[str, Any] = {"logLevel": args.log_level}
    if command == "serve":
        flags |= {"debugPort": args.debug_port, "debugHost": args.debug_host}
    if command == "eval":
        planner = {"provider": args.planner, "shortlist": args.shortlist}
        flags["planner"] = {k: v for k, v in planner.items() if v is not None} or None
    redactor = Redactor()
    logs = LogSetup(redactor)
    logs.configure(args.log_level or os.environ.get("AGENTIFY_LOG_LEVEL") or "INFO")
    try:
        sources = load_sources(args.config, flags)
        config = sources.resolve()
    except ConfigError as exc:
        print(f"agentify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    redactor.add(config.secrets())
    # run, doctor and eval print their own output: their log is quiet unless asked for.
    quiet = args.log_level or os.environ.get("AGENTIFY_LOG_LEVEL") or "WARNING"
    logs.set_level(config.log_level if command == "serve" else quiet)
    if command == "serve" and args.transport == "http":
        # uvicorn handles SIGTERM/SIGINT itself and shuts the app (and so every backend) down.
        return anyio.run(_serve_http, sources, config, logs, args.host, args.port)
    if command == "serve":
        return _run_async(lambda: _serve(sources, config, logs))
    if command == "run":
        args.cwd = os.path.abspath(args.cwd or os.getcwd())
        return _run_async(lambda: _run_task(sources, config, logs, args))
    if command == "eval":
        return _eval(sources, config, logs, args)
    return _run_async(lambda: _doctor(sources, config, logs))


def _run_async(main: Callable[[], Awaitable[int]]) -> int:
    """Runs `main`; SIGTERM and SIGINT cancel it so every backend is shut down before exit."""
    result = EXIT_OK

    async def runner() -> None:
        nonlocal result
        async with anyio.create_task_group() as tg:

            async def watch_signals(scope: anyio.CancelScope) -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        logger.info("signal {} received: shutting down", signal.Signals(signum).name)
                        scope.cancel()
                        return

            with anyio.CancelScope() as scope:
                tg.start_soon(watch_signals, scope)
                result = await main()
            if scope.cancelled_caught:
                result = EXIT_INTERRUPTED
            tg.cancel_scope.cancel()

    anyio.run(runner)
    return result


async def _serve(sources: ConfigSources, config: Config, logs: LogSetup) -> int:
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    from agentify.server import build_server

    server = build_server(sources, config, logs, on_closed=_exit_watchdog)
    logger.info("agentify {} serving MCP on stdio with {} backends", __version__, len(config.backends))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options(NotificationOptions()))
    return EXIT_OK


async def _serve_http(sources: ConfigSources, config: Config, logs: LogSetup, host: str, port: int) -> int:
    import uvicorn

    from agentify.server import build_server

    server = build_server(sources, config, logs)
    app = server.streamable_http_app(host=host, streamable_http_path="/mcp")
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving MCP on {}: reachable from other machines, with no authentication", host)
    logger.info(
        "agentify {} serving MCP on http://{}:{}/mcp with {} backends", __version__, host, port, len(config.backends)
    )
    settings = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(settings).serve()
    return EXIT_OK


def _exit_watchdog() -> None:
    """Called once every backend is closed. The SDK's stdin reader is a thread that only ends at EOF,
    so after a signal the process could wait for input forever: leave if it has not exited by itself."""

    def hard_exit() -> None:
        logger.info("agentify stopped")
        sys.stderr.flush()
        os._exit(EXIT_OK)

    timer = threading.Timer(2.0, hard_exit)
    timer.daemon = True
    timer.start()


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
            print(getattr(block, "text", None) or f"[{block.type} content]")
    return EXIT_FAILED if result.is_error else EXIT_OK


async def _doctor(sources: ConfigSources, config: Config, logs: LogSetup) -> int:
    from agentify.app import open_gateway

    print(f"agentify {__version__}")
    print(f"config: {sources.file_path or '(no config file: defaults and environment only)'}")
    async with open_gateway(sources, config, logs, console=False) as gateway:
        limit = max((b.startup_timeout_seconds for b in config.backends), default=1.0) + 1
        await gateway.manager.wait_all_settled(limit)
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
        print(f"{status.id:<{width}}  {state:<10}  {len(status.tools):>5}  {logs.redactor.text(detail)}")
    if not statuses:
        print("(no backends configured: see backends.example.json)")
        broken = True
    print("\nresult: " + ("problems found (see above)" if broken else "all good"))
    return EXIT_FAILED if broken else EXIT_OK


def _eval(sources: ConfigSources, config: Config, logs: LogSetup, args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentify.app import open_gateway
    from agentify.eval import EvalFileError, Report, evaluate_gateway, load_backends, load_cases
    from agentify.search_eval import SearchReport, evaluate_gateway_search

    try:
        cases = load_cases(Path(args.file), os.path.abspath(args.cwd or os.getcwd()))
        extra = [backend for path in args.extra_tools for backend in load_backends(Path(path))]
    except EvalFileError as exc:
        print(f"agentify eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.limit < 1:
        print("agentify eval: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    report: Report | SearchReport | None = None

    async def evaluate() -> int:
        nonlocal report
        try:
            async with open_gateway(sources, config, logs, console=False) as gateway:
                if args.mode == "search":
                    report = await evaluate_gateway_search(gateway, cases, extra, args.limit)
                else:
                    report = await evaluate_gateway(gateway, cases, extra)
        except EvalFileError as exc:
            print(f"agentify eval: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except AgentifyError as exc:  # no usable planner, e.g. sampling without an IDE
            print(f"agentify eval: {exc.message}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK

    code = _run_async(evaluate)
    if report is None:  # an error, or interrupted by a signal
        return code or EXIT_FAILED
    print(json.dumps(report.as_json(), indent=2) if args.json else "\n".join(report.lines()))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
