"""How the command line fails: exit codes, one-line messages, and unwrapping anyio's exception groups.

Exit codes: 0 ok; 1 the task or a check failed; 2 the configuration, the command line or an
environment variable is invalid; 130 interrupted by SIGINT or SIGTERM (`run`, `doctor`, `eval`).

anyio task groups wrap whatever their body raises in an `ExceptionGroup`, so a plain
`except AgentifyError` around `open_gateway` never runs; `user_error` finds the error inside.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from loguru import logger

from agentify._common.errors import StartFailed
from agentify.errors import AgentifyError, ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line argument, environment variable or input file: exit 2, one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one line naming the fix (not the usage block), exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def user_error(exc: BaseException) -> AgentifyError | ConfigError | UsageError | StartFailed | None:
    """The error a user can act on inside `exc`, however deeply task groups have wrapped it."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = user_error(inner)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, AgentifyError | ConfigError | UsageError | StartFailed) else None


def interrupted_only(exc: BaseException) -> bool:
    """True when `exc` is Ctrl-C, alone or wrapped in task groups."""
    if isinstance(exc, BaseExceptionGroup):
        return all(interrupted_only(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def _stdout_closed(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_stdout_closed(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def report(exc: BaseException, prog: str, redact: Callable[[str], str]) -> int:
    """Prints one line for `exc` on stderr (through `redact`) and returns the exit code.

    The top-level handler of `main`."""
    if interrupted_only(exc):
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if _stdout_closed(exc):  # `agentify doctor | head`: the reader has gone, there is nobody to tell
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # or the exit's flush fails again
        return EXIT_FAILED
    found = user_error(exc)
    if isinstance(found, AgentifyError):
        print(redact(f"{prog}: {found.message}"), file=sys.stderr)
        return EXIT_FAILED
    if found is not None:
        print(redact(f"{prog}: {found}"), file=sys.stderr)
        return EXIT_FAILED if isinstance(found, StartFailed) else EXIT_USAGE
    # A bug: say so in one line; the traceback goes to the log, shown with --log-level DEBUG.
    logger.opt(exception=exc).debug("unexpected error")
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    message = f"{prog}: internal error ({type(leaf).__name__}: {leaf}); "
    print(redact(message + "run again with --log-level DEBUG for the traceback and report it"), file=sys.stderr)
    return EXIT_FAILED
