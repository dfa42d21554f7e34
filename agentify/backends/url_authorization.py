"""Asking a person to open one of agentify's own pages (URL-mode elicitation), and waiting for the flow's outcome.

`ask_and_wait` is the question and the wait, whatever the page is for: authorizing an OAuth backend, reached as
each person (`per_principal.py`, the tokens land in that person's vault record) or with a shared identity on a
one-person gateway (`shared_oauth.py`, the tokens land in the token file `agentify auth` writes) through
`ask_by_url`, or giving a person's own secrets for a stdio backend (`personal.py`). The URL is the gateway's own
`/oauth/start/<id>` (`team/flows.py` guards it). The question is agentify's own: it goes through the relay every
backend question takes (`gateway/backend_questions.py`, so both eras get it), marked `own`, so it does not read as
the backend's. An OAuth authorization runs on this replica (`principal_flow.drive`) in a task group the backend
owns, so it outlives the call that asked (a 2026-07-28 round ends before the person is back).

- 2025-11-25: `elicitation/create`; the call waits for the flow (bounded by the backend's timeout), then goes
  on, and the client is told `notifications/elicitation/complete`;
- 2026-07-28: the round ends with the question (`AskingClient`); the client's next round carries the answer;
  if the flow has not completed by then, the answer is another round (at most `MAX_ROUNDS`);
- a client that cannot open a URL for its user gets `needs_auth` with the URL in the text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from agentify.backends.oauth import TokenFile
from agentify.backends.principal_flow import drive
from agentify.backends.questions import Answerer
from agentify.config import BackendConfig
from agentify.errors import BackendUnavailable, Declined, NeedsAuth
from agentify.team.flows import START_WAIT_SECONDS, Flows, FlowStoreUnavailable, Outcome, polled
from agentify.team.identity import Authorizations
from agentify.team.vault import VaultUnavailable

MAX_ROUNDS = 5  # 2026-07-28 rounds one call asks before it gives up waiting for the authorization
ROUND_WAIT_SECONDS = 10.0  # how long a 2026-07-28 round waits for the authorization before asking again
CODE_EXCHANGE_SECONDS = 30.0  # how long a call waits for a code that came back to be exchanged

T = TypeVar("T")


async def guarded(backend: str, awaitable: Awaitable[T]) -> T:
    """Vault and flow errors as the contract's: the backend is unavailable for now."""
    try:
        return await awaitable
    except (VaultUnavailable, FlowStoreUnavailable) as exc:
        raise BackendUnavailable(f"backend {backend!r}: {exc}") from None


def never_accepted(backend: str, tool: str, granted: str | None) -> BackendUnavailable:
    """A 403 `insufficient_scope` again after authorizing for what it asked: no authorization fixes that."""
    return BackendUnavailable(
        f"backend {backend!r} refused the call to {tool} for want of scope (HTTP 403 insufficient_scope), although "
        f"the authorization grants what it asked for ({granted or 'no scope'}). Authorizing again cannot fix this: "
        "the server does not accept the scope it asks for. Tell the backend's administrator."
    )


async def ask_by_url(
    spec: BackendConfig,
    routes: Authorizations,
    tg: TaskGroup,
    principal: str,
    answerer: Answerer | None,
    *,
    flow_store: Callable[[], TokenFile],
    authorized: Callable[[], Awaitable[bool]],
    wanted: str | None,
    whose: str = "as you",
    otherwise: str = "",
) -> None:
    """The caller authorizes `spec` for `principal` (`wanted`: the scope a step-up asks for), unless
    `authorized()` says the tokens are there already; returns once the flow stored them (`flow_store` makes the
    store the flow writes: a `principal_flow.FlowTokens`). `tg` owns the flow; `whose` says in the question whose
    identity the backend will see; `otherwise`, what else a person whose client cannot open the URL may do.

    Raises:
        NeedsAuth: the client cannot open the URL for its user (the text holds it), or the flow did not complete
            within `MAX_ROUNDS` rounds.
        Declined: the person declined to authorize.
        BackendUnavailable: the flow failed (what is wrong, when authorizing cannot fix it), or the flows' store
            cannot be reached.
        what the answerer raises (`AskingClient`: a 2026-07-28 round ends with the question).
    """
    flows = routes.flows
    backend = spec.id
    if await authorized():
        return
    flow_id = await guarded(backend, flows.pending(principal, backend))
    if flow_id is not None and await guarded(backend, flows.code(flow_id)) is not None:
        # The person's browser came back already: the code is being exchanged (on the replica that made the
        # flow), so this call waits for it instead of sending them to a link they have used.
        finished = await _outcome(flows, backend, flow_id, CODE_EXCHANGE_SECONDS)
        if finished is not None and finished.error is None and await authorized():
            return
    if flow_id is None:
        flow_id = await guarded(backend, flows.create(principal, backend))
        tg.start_soon(drive, spec, flow_store(), flow_id, flows, routes.callback_url())
        # Discovery and registration come first: what fails there no person can fix, so nobody is asked.
        with anyio.move_on_after(START_WAIT_SECONDS):
            step = await guarded(backend, polled(lambda: flows.first_step(flow_id)))
            if isinstance(step, Outcome) and step.error is not None:
                raise BackendUnavailable(f"backend {backend!r} cannot be authorized: {step.error}")
    url = routes.start_url(flow_id)
    await ask_and_wait(
        answerer,
        routes.flows,
        flow_id,
        UrlQuestion(
            backend=backend,
            url=url,
            elicitation_id=f"agentify-auth-{flow_id[:24]}",
            message=f"Authorize agentify to use {backend} {whose}{f' with the scope {wanted}' if wanted else ''}: "
            "open the page and sign in.",
            again="Not completed yet: finish it in the browser, then go on",
            cannot_open=f"backend {backend!r} needs you to authorize it {whose}, and your client cannot open a page "
            "for you. Open this URL in your browser (it works once, for 10 minutes), then call "
            f"again{otherwise}: {url}",
            declined=f"authorizing backend {backend!r} was declined, so the call was not made",
            unanswered=f"the authorization of backend {backend!r} has not completed after {MAX_ROUNDS} checks. Finish "
            f"it at {url} (it works once, for 10 minutes), then call again.",
            failed=f"authorizing backend {backend!r} failed",
        ),
        spec.timeout_seconds,
    )


@dataclass(frozen=True)
class UrlQuestion:
    """What agentify asks a person to do on one of its own pages (`/oauth/start/<id>`), in its own words."""

    backend: str
    url: str
    elicitation_id: str
    message: str
    """The question; a later round adds `again` and the check's number."""
    again: str
    cannot_open: str
    """Why the call ends (`NeedsAuth`) when the client cannot open the URL for its user; holds the URL."""
    declined: str
    unanswered: str
    """Why the call ends (`NeedsAuth`) when the flow has no outcome after `MAX_ROUNDS` rounds; holds the URL."""
    failed: str
    """What the flow's own error follows (`BackendUnavailable`)."""


async def ask_and_wait(
    answerer: Answerer | None, flows: Flows, flow_id: str, question: UrlQuestion, seconds: float
) -> None:
    """Asks the person to open `question.url` (agentify's own question, never labelled as the backend's) and
    returns once the flow `flow_id` completed; `seconds` bounds a 2025-11-25 wait (a 2026-07-28 round waits
    `ROUND_WAIT_SECONDS`, then asks again, at most `MAX_ROUNDS` times).

    Raises:
        NeedsAuth: the client cannot open the URL for its user, or the flow did not complete within `MAX_ROUNDS`.
        Declined: the person declined.
        BackendUnavailable: the flow ended with an error, or the flows' store cannot be reached.
        what the answerer raises (`AskingClient`: a 2026-07-28 round ends with the question).
    """
    backend = question.backend
    round_trips = bool(getattr(answerer, "round_trips", False))
    outcome: Outcome | None = None
    for round_number in range(MAX_ROUNDS):
        message = question.message
        if round_number:
            message += f" ({question.again}. Check {round_number + 1}.)"
        params = types.ElicitRequestURLParams(message=message, url=question.url, elicitation_id=question.elicitation_id)
        answers = (
            await answerer.answer(backend, {"authorize": types.ElicitRequest(params=params)}, own=True)
            if (answerer is not None)
            else types.ErrorData(code=types.INVALID_REQUEST, message="no client to ask")
        )
        if isinstance(answers, types.ErrorData):
            raise NeedsAuth(question.cannot_open)
        answer = answers.get("authorize")
        if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
            raise Declined(question.declined)
        outcome = await _outcome(flows, backend, flow_id, ROUND_WAIT_SECONDS if round_trips else seconds)
        if outcome is not None:
            break
    if outcome is None:
        raise NeedsAuth(question.unanswered)
    if outcome.error is not None:
        raise BackendUnavailable(f"{question.failed}: {outcome.error}. Call again to retry.")
    completed: Any = getattr(answerer, "completed", None)
    if completed is not None and not round_trips:
        await completed(question.elicitation_id)


async def _outcome(flows: Flows, backend: str, flow_id: str, seconds: float) -> Outcome | None:
    with anyio.move_on_after(seconds):
        outcome: Outcome = await guarded(backend, polled(lambda: flows.outcome(flow_id)))
        return outcome
    return None
