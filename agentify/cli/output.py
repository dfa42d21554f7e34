"""What the terminal commands print (`run`, `doctor`, `eval`, `connect`, `token`, `auth`): the one
place in the package that writes to stdout.

Over stdio, `serve`'s stdout is the MCP protocol: `serve_stdio_command` shuts this door first, so a
stray `say` in the serving process fails loudly instead of corrupting the stream the IDE reads.
"""

from __future__ import annotations

import sys

_closed_for: str | None = None


def say(text: str = "") -> None:
    """One line (or several, joined) of the command's result, on stdout."""
    if _closed_for is not None:
        raise RuntimeError(f"stdout is {_closed_for}: nothing else may be written to it")
    sys.stdout.write(text + "\n")


def note(text: str) -> None:
    """A message for the person at the terminal (progress, what to do next), on stderr."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def close_stdout(reason: str) -> None:
    """From now on `say` refuses: stdout belongs to `reason` (the MCP protocol)."""
    global _closed_for
    _closed_for = reason
