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
from typing import NoReturn, cast

from loguru import logger

from agentify._common.errors import ConfigError, StartFailed, as_group, first
from agentify.errors import AgentifyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line argument, environment variable or input file: exit 2, one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one line naming the fix (not the usage block), exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


UserError = AgentifyError | ConfigError | UsageError | StartFailed


def user_error(exc: BaseException) -> UserError | None:
    """The error a user can act on inside `exc`, however deeply task groups have wrapped it."""
    return cast(UserError | None, first(exc, (AgentifyError, ConfigError, UsageError, StartFailed)))


def interrupted_only(exc: BaseException) -> bool:
    """True when `exc` is Ctrl-C, alone or wrapped in task groups."""
    interrupted, rest = as_group(exc).split(KeyboardInterrupt)
    return interrupted is not None and rest is None


def report(exc: BaseException, prog: str, redact: Callable[[str], str]) -> int:
    """Prints one line for `exc` on stderr (through `redact`) and returns the exit code.

    The top-level handler of `main`."""
    if interrupted_only(exc):
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if first(exc, BrokenPipeError) is not None:  # `agentify doctor | head`: the reader has gone, nobody to tell
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
    leaf = first(exc, BaseException) or exc
    message = f"{prog}: internal error ({type(leaf).__name__}: {leaf}); "
    print(redact(message + "run again with --log-level DEBUG for the traceback and report it"), file=sys.stderr)
    return EXIT_FAILED
