"""The command line's parser: subcommands, flags and their one-line errors. Imports nothing heavy."""

from __future__ import annotations

import argparse
from typing import get_args

from agentify import __version__
from agentify.cli.audit import add_audit_parser
from agentify.cli.errors import OneLineParser, UsageError
from agentify.config.models import LogLevel
from agentify.connect.ides import IDES

COMMANDS = ("serve", "run", "doctor", "eval", "auth", "token", "vault", "pins", "connect", "audit")
TOKEN_ACTIONS = ("add", "remove", "list")
LEVELS = get_args(LogLevel)


def log_level(text: str, where: str) -> str:
    """`text` as a log level name; `where` says where it came from ("AGENTIFY_LOG_LEVEL=loud")."""
    if text.upper() not in LEVELS:
        raise UsageError(f"{where} is not a log level: use one of {', '.join(LEVELS)}")
    return text.upper()


def _level_flag(text: str) -> str:
    try:
        return log_level(text, repr(text))
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


def build_parser(prog: str = "agentify") -> argparse.ArgumentParser:
    """`prog` names the subcommand in the top-level parser's errors (`agentify run: unrecognized ...`)."""
    parser = OneLineParser(prog=prog, description="One MCP server that routes tasks to your MCP tools.")
    parser.add_argument("--version", action="version", version=f"agentify {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser, prog="agentify")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config",
            help="config file (default: $AGENTIFY_CONFIG, else ./agentify.json, else agentify.json in the user's "
            "config folder, else the one `agentify connect` wrote)",
        )
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
    run.add_argument(
        "--yes", action="store_true", help="run a tool that needs confirmation without asking (needed without a TTY)"
    )

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
        choices=["plan", "search", "public"],
        default="plan",
        help="plan: the planner's top-1 accuracy (default); search: recall at k of search_tools; public: FILE names "
        "public tool-retrieval sets (metatool, toolalpaca, restbench, all, or converted files), measured beside BM25",
    )
    evaluate.add_argument(
        "--part", choices=["heldout", "tune", "all"], default="heldout", help="--mode public: which part"
    )
    evaluate.add_argument("--sample", type=int, help="--mode public: only the first N queries of each part")
    evaluate.add_argument("--limit", type=int, default=5, help="--mode search: k, how many tools an answer holds")

    auth = sub.add_parser("auth", help="authorize agentify with an OAuth backend (opens the browser)")
    common(auth)
    auth.add_argument("backend", help="the id of a backend with auth.type oauth")

    connect = sub.add_parser("connect", help="move an IDE's MCP servers behind agentify (and back with --undo)")
    connect.add_argument("ide", nargs="?", choices=list(IDES), help="the IDE whose MCP file to rewrite")
    connect.add_argument(
        "--project", help="the project whose IDE file to use (.cursor/, .vscode/, .mcp.json); default: the user's"
    )
    connect.add_argument(
        "--config", help="agentify's config to move the servers into (default: the project's or user's agentify.json)"
    )
    connect.add_argument("--dry-run", action="store_true", help="show both files' changes, write nothing")
    connect.add_argument("--undo", action="store_true", help="restore the files as they were before `connect`")

    token = sub.add_parser("token", help="give people their own token for serve --transport http (server.auth tokens)")
    token_actions = token.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    add = token_actions.add_parser("add", help="make a token for NAME, print it once and store its hash")
    add.add_argument("name", help="who it is for: a person or a bot, as logs and traces will show it")
    add.add_argument("--scope", action="append", default=[], help="a scope the token carries (may be repeated)")
    add.add_argument(
        "--group", action="append", default=[], help="a group of server.access rules NAME is in (may be repeated)"
    )
    remove = token_actions.add_parser("remove", help="remove NAME's token: it stops working at once")
    remove.add_argument("name")
    token_actions.add_parser("list", help="the names (and scopes) that have a token")
    for action in (add, remove, token_actions.choices["list"]):
        action.add_argument("--file", help="the tokens file (default: server.auth.file of the config)")
        action.add_argument("--config", help="the config whose server.auth.file to use")

    vault = sub.add_parser("vault", help="each person's upstream tokens (backends with auth.perPrincipal)")
    vault_actions = vault.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    forget = vault_actions.add_parser("forget", help="drop NAME's upstream tokens (a JWT principal's `sub`)")
    forget.add_argument("name")
    forget.add_argument("--config", help="the config whose server.redis (or state folder) holds the vault")

    pins = sub.add_parser("pins", help="the pinned tool definitions (config pinning): list them, approve changes")
    pins_actions = pins.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    pins_list = pins_actions.add_parser("list", help="pinned and waiting tools per backend")
    pins_list.add_argument("--json", action="store_true", help="print one JSON object")
    approve = pins_actions.add_parser("approve", help="show what changed in BACKEND's tools and accept it")
    approve.add_argument("backend", help="the backend's id")
    approve.add_argument("tool", nargs="?", help="one tool (the backend's own name); default: all that wait")
    for action in (pins_list, approve):
        action.add_argument("--config", help="config file (default: $AGENTIFY_CONFIG, else ./agentify.json)")

    add_audit_parser(sub)
    sub.add_parser("arbigent", help="the Arbigent test-runner MCP server (see `agentify arbigent --help`)")
    return parser
