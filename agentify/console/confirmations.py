"""Confirmations asked in the console's page: the `Confirmer` of tasks and tool calls started there.

A call that the safety policy (`gateway.policy`) must confirm is published on the event bus as a
`confirm` event with the same text an MCP client is shown (`confirm_prompt.confirmation_message`);
the page shows it in a dialog and answers through `POST /api/confirmations/{id}`. The question
waits at most the config's `confirmTimeoutSeconds`; unanswered, it counts as dismissed ("cancel"),
and the call does not run. Every open page sees the question, the first answer wins, and each page
is told when a question is over (`state`: "answered" or "expired").
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentify.gateway.confirm_prompt import confirmation_message
from agentify.gateway.events import EventBus
from agentify.gateway.policy import Answer
from agentify.planner import Plan

ANSWERS: tuple[Answer, ...] = ("accept", "decline")


@dataclass(eq=False)
class _Question:
    id: str
    backend: str
    tool: str
    reason: str
    message: str
    asked_at: float = field(default_factory=time.time)
    answer: Answer | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)

    def as_dict(self, state: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": state,
            "backend": self.backend,
            "tool": self.tool,
            "reason": self.reason,
            "message": self.message,
            "askedAt": self.asked_at,
            "answer": self.answer,
        }


class ConsoleConfirmer:
    """Satisfies `gateway.policy.Confirmer` for calls started from the console."""

    def __init__(self, bus: EventBus, seconds: Callable[[], float]) -> None:
        """`seconds`: how long a question waits, read when it is asked (the config can change)."""
        self._bus = bus
        self._seconds = seconds
        self._open: dict[str, _Question] = {}

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        question = _Question(
            id=secrets.token_urlsafe(9),
            backend=plan.backend,
            tool=plan.tool,
            reason=reason,
            message=confirmation_message(plan.backend, plan.tool, plan.arguments, reason),
        )
        self._open[question.id] = question
        self._bus.publish("confirm", question.as_dict("asked"))
        try:
            with anyio.move_on_after(self._seconds()):
                await question.answered.wait()
        finally:
            del self._open[question.id]
            self._bus.publish("confirm", question.as_dict("answered" if question.answer else "expired"))
        return question.answer or "cancel"

    def pending(self) -> list[dict[str, Any]]:
        """The questions waiting for an answer, oldest first."""
        return [question.as_dict("asked") for question in self._open.values()]

    def answer(self, question_id: str, answer: Answer) -> bool:
        """Answers an open question; False when there is none with this id (answered, expired, or unknown)."""
        question = self._open.get(question_id)
        if question is None or question.answer is not None:
            return False
        question.answer = answer
        question.answered.set()
        return True
