"""The relay between a backend's questions and the IDE: the `Answerer` a backend call gets.

Transport-agnostic: the IDE side is the `ClientQuestions` protocol (the MCP server's `Exchange`, which
knows the IDE's era), the backend side is `agentify.backends.questions`. What the relay decides:
- a question the IDE cannot answer (no elicitation, no URL mode, no sampling, no roots) is answered to
  the backend with an error that says so: the backend's own fallback decides what happens then;
- a form or URL question begins "From backend <id> (not agentify): ", so the user knows who wants to know
  and a backend's question never passes for agentify's own; only agentify's own questions (`own=True`: the
  page it asks a person to open to authorize a backend or give their secrets, `url_authorization.py`; the form
  asking for the arguments a task did not say, `asked_arguments.py`) go without it, and a backend's question
  cannot ask for that (`questions.py` never passes it);
- what the IDE shows of a question (its message, and the titles, descriptions, enum names and defaults of
  a form's schema) is masked with the redactor's known secrets, cut to a bound and escaped, so a backend
  can neither show another backend's env secret nor fake lines or reorder text with control or bidi
  characters. What the answer carries back as the user picked it (field names, `enum` and `const`
  choices) cannot be changed: a form whose names or choices would need escaping, masking or cutting is
  refused to the backend instead;
- a sampling request's strings (its messages, tool inputs and results, system prompt, tools, metadata)
  are masked too, not escaped nor cut: the client's model reads them, and its user may be shown them;
- a URL to open is never rewritten, since a masked or cut URL would open the wrong page: one that
  carries a configured secret, control characters or more than `MAX_URL_CHARS` is refused to the
  backend instead. A URL's own state or nonce parameters are not configured secrets, so they pass;
- an IDE that does not answer within `seconds` (2025-11-25) gets the same treatment, never a hang;
- a 2026-07-28 IDE answers in its next round: every question of the round is collected first, then
  `AskingClient` ends this round (the backend call is made again in the next one, with the answers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from agentify.backends.questions import Answers
from agentify.gateway.policy import AskingClient
from agentify.security.display import escaped

MAX_MESSAGE_CHARS = 2000
MAX_SCHEMA_TEXT_CHARS = 500
MAX_URL_CHARS = 4096
_SCHEMA_TEXTS = frozenset(("title", "description", "enumNames", "default"))
"""What a form shows and the answer does not carry back as it is: masked, escaped and cut (a `default` too,
which the user sees filled in and may change)."""
_BINARY = frozenset(("data", "blob"))  # base64 images, audio and resource blobs in a sampling request

Result = TypeVar("Result", bound=BaseModel)


class ClientQuestions(Protocol):
    """What the IDE side offers: whether it can answer a kind of question, and asking it (any era)."""

    round_trips: bool
    """Whether the IDE speaks 2026-07-28 (it answers in its next round) rather than 2025-11-25."""

    def can_answer(self, request: types.InputRequest) -> bool: ...

    async def ask(self, request: types.InputRequest, result_type: type[Result], what: str) -> Result:
        """Raises AskingClient (2026-07-28, answered in the next round) or MCPError (refused, failed)."""
        ...

    async def completed(self, elicitation_id: str) -> None:
        """Tells a 2025-11-25 client that the URL it opened for `elicitation_id` has done its work."""
        ...


class BackendQuestionRelay:
    def __init__(self, client: ClientQuestions, seconds: float, mask: Callable[[str], str] = str) -> None:
        """`mask` hides the known secrets in a text (the redactor's, without its secret-shaped patterns)."""
        self._client = client
        self._seconds = seconds
        self._mask = mask

    @property
    def round_trips(self) -> bool:
        """Whether the IDE answers in its next round (2026-07-28), rather than while the call waits."""
        return self._client.round_trips

    async def completed(self, elicitation_id: str) -> None:
        """`notifications/elicitation/complete` for a URL question agentify itself asked (2025-11-25)."""
        await self._client.completed(elicitation_id)

    async def answer(self, backend: str, requests: Mapping[str, types.InputRequest], *, own: bool = False) -> Answers:
        answers: dict[str, types.InputResponse] = {}
        asking: AskingClient | None = None
        for key, asked in requests.items():
            what = f"agentify's own question about backend {backend!r}" if own else _what(asked, backend)
            if (refusal := self._unshowable(asked)) is not None:
                return types.ErrorData(code=types.INVALID_PARAMS, message=f"agentify did not pass on {what}: {refusal}")
            by = "" if own else asked_by(backend)
            request = _relayed(asked, by, self._shown, self._mask, by_request=not self._client.round_trips)
            if not self._client.can_answer(request):
                return types.ErrorData(code=types.INVALID_REQUEST, message=f"the user's client cannot answer {what}")
            try:
                with anyio.fail_after(self._seconds):
                    answers[key] = await self._client.ask(request, _result_type(request), what)
            except AskingClient as exc:  # keep collecting: the IDE gets every question of this round at once
                asking = exc
            except TimeoutError:
                return types.ErrorData(
                    code=types.REQUEST_TIMEOUT, message=f"nobody answered {what} within {self._seconds:g} s"
                )
            except MCPError as exc:
                return exc.error
        if asking is not None:
            raise asking
        return answers

    def _shown(self, text: str, limit: int) -> str:
        """Masked, then escaped, then cut: an escape can be ten times its character, so the cut comes last."""
        shown = escaped(self._mask(text))
        return shown if len(shown) <= limit else shown[:limit] + f" [... cut: {len(shown)} characters in all]"

    def _unshowable(self, request: types.InputRequest) -> str | None:
        if isinstance(request, types.ElicitRequest) and isinstance(request.params, types.ElicitRequestFormParams):
            return self._unshowable_choice(request.params.requested_schema)
        if not isinstance(request, types.ElicitRequest) or not isinstance(request.params, types.ElicitRequestURLParams):
            return None
        url = request.params.url
        if len(url) > MAX_URL_CHARS:
            return f"its URL is {len(url)} characters long (at most {MAX_URL_CHARS})"
        if escaped(url) != url:
            return "its URL holds control, format or bidi characters"
        if self._mask(url) != url:
            return "its URL carries a configured secret, which the user must not be shown"
        return None

    def _unshowable_choice(self, schema: Any, key: str = "") -> str | None:
        """Why a form cannot be shown as it is: a field name, or a choice (`enum`, `const`), that holds control,
        format or bidi characters, a configured secret, or more than `MAX_SCHEMA_TEXT_CHARS`. They come back in
        the answer as the user picked them, so they cannot be escaped or cut, only refused."""
        choices: list[Any] = []
        if isinstance(schema, dict):
            if isinstance(schema.get("properties"), dict):
                choices += list(schema["properties"])
            enum = schema.get("enum")
            choices += enum if isinstance(enum, list) else []
            choices += [schema["const"]] if "const" in schema else []
            for inner_key, inner in schema.items():
                if (why := self._unshowable_choice(inner, inner_key)) is not None:
                    return why
        elif isinstance(schema, list) and key != "enum":
            for inner in schema:
                if (why := self._unshowable_choice(inner, key)) is not None:
                    return why
        for choice in (c for c in choices if isinstance(c, str)):
            if len(choice) > MAX_SCHEMA_TEXT_CHARS or escaped(choice) != choice or self._mask(choice) != choice:
                shown = self._shown(choice, 80)
                return f"its form has a field name or choice ({shown}) the user could not be shown as it is"
        return None


def _relayed(
    request: types.InputRequest,
    by: str,
    shown: Callable[[str, int], str],
    mask: Callable[[str], str],
    *,
    by_request: bool,
) -> types.InputRequest:
    """The question as the IDE gets it: a form or URL question with `by` (who asks: `asked_by` a backend, or
    nothing for agentify's own) in front of its message, a sampling request with its texts masked, and without
    the backend's `_meta` (its own trace context, new in every round, which would make the same question look
    new to the round that carries its answer).

    A URL question of a 2026-07-28 backend has no `elicitationId`, which a 2025-11-25 request must
    carry: it gets one made from the URL (the same question, the same id)."""
    params: Any = request.params
    if params is None:
        return request
    update: dict[str, Any] = {"meta": None}
    if isinstance(request, types.CreateMessageRequest):
        params = types.CreateMessageRequestParams.model_validate(
            _texts_masked(params.model_dump(by_alias=True, exclude_unset=True), mask)
        )
    if isinstance(request, types.ElicitRequest):
        update["message"] = f"{by}{shown(params.message, MAX_MESSAGE_CHARS)}"
        if isinstance(params, types.ElicitRequestFormParams):
            update["requested_schema"] = _schema_shown(params.requested_schema, shown)
        if by_request and isinstance(params, types.ElicitRequestURLParams) and not params.elicitation_id:
            update["elicitation_id"] = "agentify-" + hashlib.sha256(params.url.encode()).hexdigest()[:16]
    return request.model_copy(update={"params": params.model_copy(update=update)})


def asked_by(backend: str) -> str:
    """How a backend's question begins, so that it never passes for agentify's own confirmation."""
    return f"From backend {escaped(backend)} (not agentify): "


def _texts_masked(value: Any, mask: Callable[[str], str], key: str = "") -> Any:
    """`value` (a sampling request's params, as JSON) with every string masked, whatever its key: the model
    reads them all (text blocks with or without their `type`, embedded resources, tool inputs and results,
    tool descriptions, metadata). Only base64 `data` and `blob` are left as they are."""
    if isinstance(value, str):
        return value if key in _BINARY else mask(value)
    if isinstance(value, dict):
        return {k: _texts_masked(v, mask, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_texts_masked(v, mask, key) for v in value]
    return value


def _schema_shown(value: Any, shown: Callable[[str, int], str], key: str = "") -> Any:
    """The schema with every title and description (and enum name) as the IDE may show it."""
    if isinstance(value, str):
        return shown(value, MAX_SCHEMA_TEXT_CHARS) if key in _SCHEMA_TEXTS else value
    if isinstance(value, dict):
        return {k: _schema_shown(v, shown, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_schema_shown(v, shown, key) for v in value]
    return value


def _what(request: types.InputRequest, backend: str) -> str:
    if isinstance(request, types.ElicitRequest):
        kind = "a URL to open" if isinstance(request.params, types.ElicitRequestURLParams) else "a question"
        return f"{kind} from backend {backend!r}"
    if isinstance(request, types.CreateMessageRequest):
        return f"a reply of its model (sampling) for backend {backend!r}"
    return f"its roots, for backend {backend!r}"


AnswerType = (
    type[types.ElicitResult]
    | type[types.CreateMessageResult]
    | type[types.CreateMessageResultWithTools]
    | type[types.ListRootsResult]
)


def _result_type(request: types.InputRequest) -> AnswerType:
    if isinstance(request, types.ElicitRequest):
        return types.ElicitResult
    if isinstance(request, types.CreateMessageRequest):
        return types.CreateMessageResultWithTools if request.params.tools else types.CreateMessageResult
    return types.ListRootsResult
