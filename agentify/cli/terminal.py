"""`agentify run` at a terminal: its confirmations are asked there, and its hints name commands.

The confirmation is the same text an IDE shows (`confirmation_message`), on stderr (stdout carries the
result), answered y/N on stdin. Without a terminal nobody can answer: the call is refused with the
flag that allows it (`--yes`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

import anyio

from agentify.errors import Denied
from agentify.gateway.confirm_prompt import confirmation_message
from agentify.gateway.policy import Answer, Confirmer
from agentify.planner import Plan

# What an MCP client is told to call, and the command that shows the same at a terminal.
_MCP_HINTS = (("check `list_backends`", "run `agentify doctor`"), (" or call list_backends", ""))


class TerminalConfirmer:
    """Asks y/N at the terminal; anything but y or yes declines. `asking` is entered while the question
    waits (the progress line steps aside, and the time is not the task's)."""

    def __init__(self, asking: Callable[[], AbstractContextManager[None]]) -> None:
        self._asking = asking

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        message = confirmation_message(plan.backend, plan.tool, plan.arguments, reason)
        shown = message.rsplit("\n", 1)[0]  # its last line tells an IDE user which button to press
        with self._asking():
            print(f"{shown}\nRun it? [y/N] ", end="", file=sys.stderr, flush=True)
            answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return "accept" if answer.strip().lower() in ("y", "yes") else "decline"


class AcceptAll:
    """`--yes`: the user allowed every confirmation of this run in advance."""

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        return "accept"


class NoTerminal:
    """stdin is not a terminal: nobody can answer, so the call does not run."""

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        raise Denied(
            f"{plan.backend}.{plan.tool} needs your confirmation ({reason}), but there is no terminal to ask at "
            "(stdin is not a TTY), so it was not run. Run it at a terminal to be asked, or pass --yes to run it "
            "without asking."
        )


def terminal_confirmer(yes: bool, asking: Callable[[], AbstractContextManager[None]]) -> Confirmer:
    if yes:
        return AcceptAll()
    return TerminalConfirmer(asking) if sys.stdin.isatty() else NoTerminal()


def for_terminal(text: str) -> str:
    """`text` with its hints for MCP clients (`check list_backends`) turned into commands (`agentify doctor`)."""
    for hint, command in _MCP_HINTS:
        text = text.replace(hint, command)
    return text
