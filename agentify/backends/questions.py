"""A backend's questions during a call (elicitation, sampling), on the backend's side of the gateway.

A backend asks in one of two ways, and both reach the `Answerer` the caller gave (the gateway's relay
to the IDE, `gateway/backend_questions.py`):
- by request, on a 2025-11-25 session: `elicitation/create` or `sampling/createMessage` arrives on
  the session. Nothing on the wire says which call a request belongs to, so a call leases a session
  of its own (`pool.py`) and the request goes to the one call in flight; on a session several calls
  share (a remote OAuth backend's) it is refused (the backend's own fallback applies) rather than
  shown to the wrong user's call.
- with an `InputRequiredResult`, on a 2026-07-28 session: `resolve` answers its questions and makes
  the call again with the answers and the backend's `requestState`, round after round (bounded).

An `Answerer` that raises ends the call with that exception: it is how the relay says "the IDE answers
this in its next round" (2026-07-28 IDEs); the backend is told the question was withdrawn and its call
is cancelled, and the IDE's next round makes the call again, now with the answer at hand.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types

from agentify.backends.logs import LogSink
from agentify.errors import Denied

CANCEL_FIRST_SECONDS = 2.0  # how long a withdrawn question's answer waits for its call's cancel to go out
MAX_ROUNDS = 10  # InputRequiredResult rounds of one call, as the SDKs' clients allow
STATE_ONLY_WAIT = 0.1  # a round that carries only requestState: the backend is busy, ask again after this

CANNOT_ANSWER = "the client of this call cannot answer questions"
Answers = dict[str, types.InputResponse] | types.ErrorData


class Answerer(Protocol):
    async def answer(self, backend: str, requests: Mapping[str, types.InputRequest], *, own: bool = False) -> Answers:
        """The answers by key, or the error the backend gets (its own fallback decides what then). `own`: the
        question is agentify's own about `backend` (a page to open to authorize it, `url_authorization.py`), shown
        as agentify's; a backend's questions never pass it, so they are always shown as the backend's.

        Raises whatever should end the call instead (it reaches the caller of `call_tool`)."""
        ...


@dataclass(eq=False)
class _Call:
    answerer: Answerer | None
    logs: LogSink | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ended_by: BaseException | None = None
    left: anyio.Event = field(default_factory=anyio.Event)


class InFlight:
    """The calls of one backend in flight; the session's callbacks route questions and log messages to them."""

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._calls: list[_Call] = []

    @contextmanager
    def call(self, answerer: Answerer | None, logs: LogSink | None = None) -> Iterator[anyio.CancelScope]:
        """A call in flight: run it inside the scope yielded. Re-raises what ended it from a question."""
        call = _Call(answerer, logs)
        self._calls.append(call)
        try:
            yield call.scope
        finally:
            self._calls.remove(call)
            call.left.set()
        if call.ended_by is not None:
            raise call.ended_by

    def log(self, params: types.LoggingMessageNotificationParams) -> bool:
        """Hands a log message to the one call in flight (its sink, if its client wants logs); False when there
        is no call or several, so that the message is nobody's call's (`logs.py`)."""
        if len(self._calls) != 1:
            return False
        sink = self._calls[0].logs
        if sink is not None:
            sink.heard(self._backend, params)
        return True

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        answer = await self._ask(types.ElicitRequest(params=params))
        return answer if isinstance(answer, types.ElicitResult | types.ErrorData) else _wrong_kind()

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        answer = await self._ask(types.CreateMessageRequest(params=params))
        ok = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData
        return answer if isinstance(answer, ok) else _wrong_kind()

    async def _ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        if len(self._calls) != 1:
            why = "no call of this backend is in flight" if not self._calls else "several calls are in flight"
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"agentify cannot tell which call this question belongs to ({why}), so it was not shown",
            )
        call = self._calls[0]
        if call.answerer is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=CANNOT_ANSWER)
        try:
            answers = await call.answerer.answer(self._backend, {"question": request})
        except Exception as exc:  # the answerer's verdict on the call: it is raised in the call's own task
            call.ended_by = exc
            call.scope.cancel()
            # The backend hears of the cancel before the answer, so its fallback cannot act on the call.
            with anyio.move_on_after(CANCEL_FIRST_SECONDS):
                await call.left.wait()
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="the question was withdrawn: the call is made again with its answer"
            )
        return answers if isinstance(answers, types.ErrorData) else answers["question"]


Send = Callable[[types.InputResponses | None, str | None], Awaitable[types.CallToolResult | types.InputRequiredResult]]


async def resolve(
    first: types.CallToolResult | types.InputRequiredResult,
    send: Send,
    answerer: Answerer | None,
    backend: str,
    roots: Callable[[], Sequence[types.Root]] | None,
) -> types.CallToolResult:
    """The call's result, after answering the `InputRequiredResult` rounds (2026-07-28 backends).

    A `roots/list` among the questions is answered here, as a 2025-11-25 session's is: with the IDE's
    roots where the backend has `forwardRoots` (`roots`), else with none.

    Raises:
        Denied: the client cannot answer (there is no `answerer`, or it returned an error), or the
            backend kept asking past `MAX_ROUNDS`.
        What the answerer raises.
    """
    result = first
    for _ in range(MAX_ROUNDS):
        if isinstance(result, types.CallToolResult):
            return result
        responses: types.InputResponses | None = None
        if result.input_requests:
            asked = {k: r for k, r in result.input_requests.items() if not isinstance(r, types.ListRootsRequest)}
            answers = await answerer.answer(backend, asked) if answerer is not None and asked else {}
            if not isinstance(answers, dict) or len(answers) < len(asked):
                why = answers.message if isinstance(answers, types.ErrorData) else CANNOT_ANSWER
                raise Denied(f"backend {backend!r} asked a question before it would go on, and it got no answer: {why}")
            listed = types.ListRootsResult(roots=list(roots()) if roots is not None else [])
            responses = {k: answers.get(k, listed) for k in result.input_requests}
        else:
            await anyio.sleep(STATE_ONLY_WAIT)
        result = await send(responses, result.request_state)
    if isinstance(result, types.CallToolResult):
        return result
    raise Denied(f"backend {backend!r} kept asking questions for more than {MAX_ROUNDS} rounds, so the call was ended")


def _wrong_kind() -> types.ErrorData:
    return types.ErrorData(code=types.INTERNAL_ERROR, message="the client answered with the wrong kind of result")
