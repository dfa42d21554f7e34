"""`agentify audit verify FILE...`: whether audit files still form one unbroken chain (team/audit_chain.py).

Exit 0 when the chain holds (a line on stdout says how many lines and files); 1 when it breaks, naming
the file and line of the first break on stderr, or when a file cannot be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentify.cli.errors import EXIT_FAILED, EXIT_OK, OneLineParser
from agentify.cli.output import note, say

ACTIONS = ("verify",)


def add_audit_parser(sub: Any) -> None:
    """`audit` on the command line's subcommands (`sub`, from `add_subparsers`)."""
    audit = sub.add_parser("audit", help="check the audit chain of server.audit")
    actions = audit.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    verify = actions.add_parser(
        "verify", help="exit 0 when the files form one unbroken chain, else 1 naming the first line that breaks it"
    )
    verify.add_argument(
        "files", nargs="+", metavar="FILE", help="audit files, in any order: FILE.N (rotated) are read before FILE"
    )


def audit_command(args: argparse.Namespace) -> int:
    from agentify.team.audit_chain import Unreadable, verify

    prog = "agentify audit verify"
    try:
        checked = verify([Path(name) for name in args.files])
    except Unreadable as exc:
        note(f"{prog}: {exc}; nothing was verified")
        return EXIT_FAILED
    if checked.broken is not None:
        note(f"{prog}: the chain breaks at {checked.broken} (after {checked.lines - 1} lines that hold)")
        return EXIT_FAILED
    start = "from its first line" if checked.starts else "from a line of an older file not given (rotated away?)"
    say(f"{prog}: the chain holds: {checked.lines} lines in {checked.files} files, {start}")
    return EXIT_OK
