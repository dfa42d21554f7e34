"""What the gateway asks the IDE while serving a `tools/call`: sampling (the sampling planner),
elicitation (confirmations) and roots, in both protocol eras.

- 2025-11-25 and earlier: server-to-client requests on the channel of the call being served; an
  answer is bound to its request by JSON-RPC, and one that comes after `seconds` finds nobody
  waiting.
- 2026-07-28: there are none. The call answers an `InputRequiredResult` with the questions and a
  `requestState`; the client answers them (its user, its model) and retries the same call with
  the answers (SEP-2322, driven by the SDKs' clients). The state is sealed by the SDK's
  `RequestStateBoundary` (AES-GCM, bound to this tool and its arguments, expiring after
  `seconds`), so what it records (the questions asked, the answers so far, the plan awaiting
  confirmation) is what this process wrote. Each question gets a random id in the state: an
  answer counts only under an id the state lists as asked, for the question asked under it, and
  only once (`AnswerLedger`); `inputResponses` without a state are refused.

`Exchange` is the one object per `tools/call` that knows the era; the planner and the policy
see only the `Sampler` and `Confirmer` protocols. In the 2026-07-28 era they raise
`AskingClient` when the answer is not there yet; the handler answers `input_required()`.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, ValidationError

from agentify.errors import Denied, InvalidInput
from agentify.gateway.confirm_prompt import confirmation_message
from agentify.gateway.policy import Answer, AskingClient
from agentify.planner import Plan
from agentify.planner.prompt import document_path
from agentify.planner.sampling import MAX_TOKENS, SamplingResult
from agentify.team.answer_ledger import AnswerLedger, MemoryLedger

ROUND_TRIP_VERSION = "2026-07-28"
CONFIRM_TIMEOUT_SECONDS = 600.0
STATE_VERSION = 2
CLOCK_SKEW_SECONDS = 60.0
# One button: an empty form, so accepting it is the confirmation (no checkbox to tick as well).
CONFIRM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
Result = TypeVar("Result", bound=BaseModel)


@dataclass(frozen=True)
class StateBoundary:
    """The SDK's `RequestStateBoundary`, whose refusal of a state (expired, or not sealed here for this call)
    also says what to do: the SDK's own message names neither the time a question stays open nor a way on."""

    sealing: RequestStateBoundary
    seconds: float

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await self.sealing(ctx, call_next)
        except MCPError as exc:
            if not isinstance(exc.data, dict) or exc.data.get("reason") != "invalid_request_state":
                raise
            raise MCPError(
                exc.code,
                f"{exc.message}: the answers came after the {self.seconds:g} s a question stays open "
                "(confirmTimeoutSeconds), or belong to another call or to a gateway with other keys "
                "(replicas share AGENTIFY_STATE_KEYS). Call the tool again without requestState to be asked anew.",
                exc.data,
            ) from None


@dataclass(frozen=True)
class Questions:
    """What every `tools/call` of one server shares about asking the client: how long a question stays
    open (`confirmTimeoutSeconds`), and which answers were used."""

    seconds: float = CONFIRM_TIMEOUT_SECONDS
    ledger: AnswerLedger = field(default_factory=MemoryLedger)
    keys: tuple[str, ...] = field(default=(), repr=False)
    """`AGENTIFY_STATE_KEYS` (`shared_state`); none: a process-local key, state lives as long as the gateway."""

    def security(self) -> RequestStateSecurity:
        """The keys, the time to live and the principal binding of the sealed state."""
        if self.keys:
            return RequestStateSecurity(keys=list(self.keys), ttl=self.seconds)
        return RequestStateSecurity.ephemeral(ttl=self.seconds)

    def boundary(self, name: str) -> StateBoundary:
        """The middleware sealing `requestState`, under one audience (the server's name) on every replica."""
        return StateBoundary(RequestStateBoundary(self.security(), default_audience=name), self.seconds)

    async def aclose(self) -> None:
        """Closes the ledger's connections, if it has any."""
        await self.ledger.aclose()


class Exchange:
    """The client requests of one `tools/call`, in whichever era the client speaks."""

    def __init__(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, questions: Questions
    ) -> None:
        self._ctx = ctx
        self._questions = questions
        self.round_trips = is_version_at_least(ctx.session.protocol_version, ROUND_TRIP_VERSION)
        state = _decode(params.request_state) if self.round_trips else {}
        self._recorded: dict[str, Any] = dict(state.get("answers") or {})
        """Answers acted on in earlier rounds, by question digest: each round runs the task from the start."""
        self._asked: dict[str, str] = dict(state.get("asked") or {})
        """The previous round's questions: random id -> question digest."""
        expires = state.get("exp")
        self._expires = float(expires) if isinstance(expires, int | float) else time.time() + questions.seconds
        self.plan: Plan | None = _plan_from(state.get("plan"))
        """The plan a user is confirming, planned in an earlier round (2026-07-28)."""
        self.resumed_from: str | None = state.get("trace") if isinstance(state.get("trace"), str) else None
        self._responses = dict(params.input_responses or {}) if self.round_trips else {}
        # Answers without the state that asked their questions: nothing was asked, so nothing is answered.
        self._unsolicited = bool(self._responses) and not params.request_state
        self._pending: dict[str, types.InputRequest] = {}
        self._pending_keys: dict[str, str] = {}
        self._keep: Plan | None = None

    def unsolicited_error(self) -> InvalidInput | None:
        if not self._unsolicited:
            return None
        return InvalidInput(
            "this tools/call carries inputResponses but no requestState: answers count only for the questions "
            "of the round that asked them. Call the tool again without inputResponses to be asked."
        )

    @property
    def _capabilities(self) -> types.ClientCapabilities | None:
        if not (self.round_trips or self._ctx.session.can_send_request):
            return None
        return self._ctx.session.client_capabilities

    def sampler(self) -> ExchangeSampler | None:
        capabilities = self._capabilities
        if capabilities is None or capabilities.sampling is None:
            return None
        return ExchangeSampler(self, supports_tools=capabilities.sampling.tools is not None)

    def confirmer(self) -> ExchangeConfirmer | None:
        capabilities = self._capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            return None  # no elicitation, or URL mode only: a form cannot be shown
        return ExchangeConfirmer(self, self._questions.seconds)

    def can_answer(self, request: types.InputRequest) -> bool:
        """Whether the client declared the capability this question needs (a backend's question, relayed)."""
        capabilities = self._capabilities
        if capabilities is None:
            return False
        if isinstance(request, types.ElicitRequest):
            elicitation = capabilities.elicitation
            if elicitation is None:
                return False
            if isinstance(request.params, types.ElicitRequestURLParams):
                return elicitation.url is not None
            return elicitation.form is not None or elicitation.url is None  # an empty capability means forms
        if isinstance(request, types.CreateMessageRequest):
            sampling = capabilities.sampling
            return sampling is not None and (not request.params.tools or sampling.tools is not None)
        return capabilities.roots is not None

    def offers_roots(self) -> bool:
        capabilities = self._capabilities
        return capabilities is not None and capabilities.roots is not None

    async def list_roots(self) -> list[types.Root]:
        """The client's roots. Raises AskingClient (2026-07-28, not answered yet) or MCPError."""
        result = await self.ask(types.ListRootsRequest(), types.ListRootsResult, "its roots (workspace folders)")
        return list(result.roots)

    async def ask(self, request: types.InputRequest, result_type: type[Result], what: str) -> Result:
        """The client's answer to `request`.

        Raises:
            AskingClient: 2026-07-28 and not answered yet: the request goes into `input_required()`.
            MCPError: the client refused or failed (2025-11-25), or answered with the wrong shape.
            InvalidInput: the answer was used in an earlier round already (a replayed round).
        """
        if not self.round_trips:
            metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
            return await self._ctx.session.send_request(request, result_type, metadata=metadata)  # type: ignore[arg-type]
        key = _key(request)
        wire = self._recorded.get(key)
        if wire is None:
            question = next((q for q, k in self._asked.items() if k == key and q in self._responses), None)
            if question is None:  # not asked yet, or not answered: a new question under a new id
                question = secrets.token_urlsafe(16)
                self._pending[question] = request
                self._pending_keys[question] = key
                raise AskingClient(what)
            # Kept past the state's expiry by the seal's allowance for clock skew.
            if not await self._questions.ledger.use(question, self._expires + CLOCK_SKEW_SECONDS):
                raise InvalidInput(
                    f"the answer about {what} was already used once: an answer counts for one round only. "
                    "Call the tool again without requestState to be asked anew."
                )
            wire = self._responses[question].model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            result = result_type.model_validate(wire)
        except ValidationError:
            raise MCPError(code=types.INVALID_PARAMS, message=f"the answer about {what} has the wrong shape") from None
        self._recorded[key] = wire
        return result

    async def completed(self, elicitation_id: str) -> None:
        """`notifications/elicitation/complete` (2025-11-25), on the channel of the call being served; a client
        that is gone misses nothing it could act on."""
        if self.round_trips:
            return
        notification = types.ElicitCompleteNotification(
            params=types.ElicitCompleteNotificationParams(elicitation_id=elicitation_id)
        )
        with anyio.move_on_after(5):
            await self._ctx.session.send_notification(notification, related_request_id=self._ctx.request_id)

    def keep_plan(self, plan: Plan) -> None:
        """The plan being confirmed, so the next round runs this plan instead of planning anew."""
        self._keep = plan

    def input_required(self, trace_id: str | None) -> types.InputRequiredResult:
        plan = self._keep or self.plan
        state = {
            "v": STATE_VERSION,
            "exp": time.time() + self._questions.seconds,
            "asked": self._pending_keys,
            "answers": self._recorded,
            "plan": None if plan is None else _plan_dict(plan),
            "trace": trace_id,
        }
        return types.InputRequiredResult(input_requests=dict(self._pending), request_state=json.dumps(state))


class ExchangeSampler:
    """The sampling planner's channel to the client's model."""

    def __init__(self, exchange: Exchange, *, supports_tools: bool) -> None:
        self._exchange = exchange
        self.supports_tools = supports_tools

    async def create(
        self, messages: list[types.SamplingMessage], *, system_prompt: str, tools: list[types.Tool] | None
    ) -> SamplingResult:
        params = types.CreateMessageRequestParams(
            messages=messages,
            max_tokens=MAX_TOKENS,
            system_prompt=system_prompt,
            tools=tools,
            tool_choice=types.ToolChoice(mode="auto") if tools else None,
        )
        request = types.CreateMessageRequest(params=params)
        what = "a plan from its model (sampling)"
        if tools:
            return await self._exchange.ask(request, types.CreateMessageResultWithTools, what)
        return await self._exchange.ask(request, types.CreateMessageResult, what)


class ExchangeConfirmer:
    """Asks the user, with a one-button form, whether a planned call may run."""

    def __init__(self, exchange: Exchange, seconds: float) -> None:
        self._exchange = exchange
        self._seconds = seconds

    async def confirm(self, plan: Plan, reason: str) -> Answer:
        """The user's answer. Raises Denied when nobody answered in time (2025-11-25)."""
        message = confirmation_message(plan.backend, plan.tool, plan.arguments, reason)
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=CONFIRM_SCHEMA)
        )
        self._exchange.keep_plan(plan)
        result = None
        with anyio.move_on_after(self._seconds):
            try:
                result = await self._exchange.ask(request, types.ElicitResult, f"a confirmation of {plan.tool}")
            except MCPError:
                return "cancel"
        if result is None:
            raise Denied(
                f"nobody answered the confirmation for {plan.backend}.{plan.tool} within {self._seconds:g} s, so it "
                "was not run. Run the task again and answer it, or give more time with confirmTimeoutSeconds."
            )
        return result.action


def first_root_path(roots: list[types.Root] | None) -> str | None:
    """The local path of the first `file://` root, where a task without a working directory runs."""
    for root in roots or []:
        if str(root.uri).startswith("file:"):
            return document_path(str(root.uri))
    return None


def _key(request: types.InputRequest) -> str:
    wire = request.model_dump(mode="json", by_alias=True, exclude_none=True)
    digest = hashlib.sha256(json.dumps(wire, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]
    return f"{request.method.replace('/', '-')}-{digest}"


def _decode(state: str | None) -> dict[str, Any]:
    """The plaintext the boundary unsealed (so this process wrote it); anything else counts as no state."""
    if not state:
        return {}
    try:
        data = json.loads(state)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) and data.get("v") == STATE_VERSION else {}


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return {
        "backend": plan.backend,
        "tool": plan.tool,
        "arguments": plan.arguments,
        "planner": plan.planner,
        "reasoning": plan.reasoning,
    }


def _plan_from(data: Any) -> Plan | None:
    if not isinstance(data, dict) or not isinstance(data.get("arguments"), dict):
        return None
    return Plan(
        backend=str(data.get("backend")),
        tool=str(data.get("tool")),
        arguments=data["arguments"],
        planner=str(data.get("planner")),
        reasoning=data.get("reasoning"),
    )
