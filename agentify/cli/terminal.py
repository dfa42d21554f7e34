"""`agentify run` at a terminal: its confirmations and agentify's own forms are asked there, and its hints
name commands.

The confirmation is the same text an IDE shows (`confirmation_message`), on stderr (stdout carries the
result), answered y/N on stdin. Without a terminal nobody can answer: the call is refused with the
flag that allows it (`--yes`). The form asking for the arguments a task does not say
(`gateway/asked_arguments.py`) is asked one field a line (`TerminalForm`); without a terminal the task is the
`no_plan` that says to put them in the task.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import anyio
import mcp_types as types

from agentify.backends.questions import Answerer, Answers
from agentify.errors import Denied
from agentify.gateway.confirm_prompt import confirmation_message
from agentify.gateway.policy import Answer, Confirmer
from agentify.planner import Plan
from agentify.planner.form import choices
from agentify.security.display import escaped

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


class TerminalForm:
    """Answers agentify's own form (`own`) at the terminal: its message, then one line a field (its title,
    description, choices and default shown masked by `mask` and escaped). A blank line takes the field's default,
    or leaves it blank (the gateway then says it is missing); end of input (Ctrl-D) dismisses the form. A
    backend's question is not answered here, as without a terminal."""

    def __init__(self, asking: Callable[[], AbstractContextManager[None]], mask: Callable[[str], str]) -> None:
        self._asking = asking
        self._mask = mask

    async def answer(self, backend: str, requests: Mapping[str, types.InputRequest], *, own: bool = False) -> Answers:
        answers: dict[str, types.InputResponse] = {}
        for key, request in requests.items():
            params = request.params if isinstance(request, types.ElicitRequest) else None
            if not own or not isinstance(params, types.ElicitRequestFormParams):
                return types.ErrorData(code=types.INVALID_REQUEST, message="agentify run answers only its own forms")
            with self._asking():
                answers[key] = await self._fill(params)
        return answers

    async def _fill(self, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        _say(self._shown(params.message) + " (Ctrl-D to cancel)\n")
        content: dict[str, Any] = {}
        for name, field in (params.requested_schema.get("properties") or {}).items():
            _say(self._prompt(name, field))
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                _say("\n")
                return types.ElicitResult(action="cancel")
            text = line.strip()
            content[name] = field["default"] if not text and "default" in field else _typed(field, text)
        return types.ElicitResult(action="accept", content=content)

    def _prompt(self, name: str, field: Mapping[str, Any]) -> str:
        said = [str(field.get("title") or name)]
        if field.get("description"):
            said.append(f"({field['description']})")
        if allowed := choices(field):
            several = ", several: a,b" if field.get("type") == "array" else ""
            said.append("[" + "/".join(str(c) for c in allowed) + "]" + several)
        elif field.get("type") == "boolean":
            said.append("[y/n]")
        if "default" in field:
            default = field["default"]
            shown = ",".join(map(str, default)) if isinstance(default, list) else str(default)
            said.append(f"[default: {'y' if default is True else 'n' if default is False else shown}]")
        return self._shown(" ".join(said)) + ": "

    def _shown(self, text: str) -> str:
        return escaped(self._mask(text))


def _say(text: str) -> None:
    print(text, end="", file=sys.stderr, flush=True)


def _typed(field: Mapping[str, Any], text: str) -> Any:
    """A line as the field's type; a line that is not one stays text, for the tool's schema to name (so does a
    number that is not finite: `nan`, `inf`, which JSON cannot carry)."""
    kind = field.get("type")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            number = float(text)
            return number if math.isfinite(number) else text
    except ValueError:
        return text
    if kind == "boolean" and text.lower() in ("y", "yes", "true", "n", "no", "false"):
        return text.lower() in ("y", "yes", "true")
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def terminal_form(asking: Callable[[], AbstractContextManager[None]], mask: Callable[[str], str]) -> Answerer | None:
    """Who asks for the arguments a task does not say: the terminal, when stdin is one."""
    return TerminalForm(asking, mask) if sys.stdin.isatty() else None


def terminal_confirmer(yes: bool, asking: Callable[[], AbstractContextManager[None]]) -> Confirmer:
    if yes:
        return AcceptAll()
    return TerminalConfirmer(asking) if sys.stdin.isatty() else NoTerminal()


def for_terminal(text: str) -> str:
    """`text` with its hints for MCP clients (`check list_backends`) turned into commands (`agentify doctor`)."""
    for hint, command in _MCP_HINTS:
        text = text.replace(hint, command)
    return text
