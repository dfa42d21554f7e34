"""The operations principals ask for, as the audit and the metrics see them.

The MCP adapter (mcp_server/operations.py) opens a `Draft` around every `tools/call`, `resources/read`,
`prompts/get` and `completion/complete` it serves; what only deeper layers know is noted on it from
where it is known, through the context variable, without passing it along:

    reached(backend, tool, name)   the task runner: the backend tool a call resolved to
    answered()                     the task runner: the backend answered the call (its result is its own)
    decided(decision)              the task runner: the user confirmed or declined; other layers: a refusal
    failed(code)                   an error code that a protocol error no longer carries (offers)

When the operation ends, the adapter turns the draft into one `Operation` and hands it to every sink
(the audit chain, the metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

Decision = Literal["allowed", "forbidden", "rate_limited", "confirmed", "declined", "withheld"]
REFUSALS: dict[str, Decision] = {"forbidden": "forbidden", "rate_limited": "rate_limited", "tool_changed": "withheld"}
"""Error codes that are a refusal, and the decision each records."""
NO_ARGUMENTS: Any = object()
"""`Operation.arguments` of an operation that carries none (`resources/read`): its `argsSha256` is null."""


@dataclass
class Draft:
    operation: str
    target: str | None = None
    backend: str | None = None
    tool: str | None = None
    decision: Decision | None = None
    answered: bool = False
    code: str | None = None


@dataclass(frozen=True, kw_only=True)
class Operation:
    """One operation as it ended. `arguments` are the values themselves: a sink hashes them and never
    keeps them (`NO_ARGUMENTS`: none). `backend` and `tool` are set when the operation resolved to a
    backend tool (`target` may also be what was asked for, known or not)."""

    time: float
    method: str
    """The MCP method (`tools/call`, ...), or `trust` for a change of trust."""
    principal: str
    client: str | None
    operation: str
    target: str | None
    arguments: Any
    decision: Decision
    outcome: str
    duration_ms: float
    trace_id: str | None
    backend: str | None = None
    tool: str | None = None


OperationSink = Callable[[Operation], None]
"""Hears every operation as it ends, on the event loop: it must return at once."""

_DRAFT: ContextVar[Draft | None] = ContextVar("agentify.operation", default=None)


@contextmanager
def drafting(draft: Draft) -> Iterator[Draft]:
    token = _DRAFT.set(draft)
    try:
        yield draft
    finally:
        _DRAFT.reset(token)


def reached(backend: str, tool: str, name: str) -> None:
    """The operation resolved to `backend`'s `tool`, which the gateway names `name`."""
    if (draft := _DRAFT.get()) is not None:
        draft.backend, draft.tool, draft.target = backend, tool, name


def answered() -> None:
    if (draft := _DRAFT.get()) is not None:
        draft.answered = True


def decided(decision: Decision) -> None:
    if (draft := _DRAFT.get()) is not None:
        draft.decision = decision


def failed(code: str) -> None:
    if (draft := _DRAFT.get()) is not None:
        draft.code = code


def decision_of(draft: Draft, outcome: str) -> Decision:
    """A refusal's error code decides; else what was noted (confirmed, declined); else allowed."""
    return REFUSALS.get(outcome) or draft.decision or "allowed"
