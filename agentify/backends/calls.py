"""The call adapter: one tool call on a live session, and every failure mapped to the contract's codes here.

Like httpx's `map_httpcore_exceptions`: whatever the transport or the SDK raises during a call
(timeouts, malformed results, JSON-RPC errors, a connection that ended, a refused credential)
becomes `TaskTimeout`, `BackendError` or `BackendUnavailable` in this module and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from opentelemetry import propagate
from pydantic import TypeAdapter, ValidationError

from agentify.backends.connection import Link
from agentify.backends.era import is_modern
from agentify.backends.logs import LogSink
from agentify.backends.questions import Answerer, InFlight, resolve
from agentify.backends.session import RootsGetter
from agentify.config import BackendConfig
from agentify.errors import AgentifyError, BackendError, BackendUnavailable, TaskTimeout

_R = TypeVar("_R", bound=types.Result)

LINK_END_WAIT = 2.0  # how long a failed call waits to learn why its connection ended
_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)


async def call_tool(
    session: ClientSession,
    link: Link,
    spec: BackendConfig,
    tool: str,
    arguments: dict[str, Any],
    progress: ProgressFnT | None,
    stderr_hint: Callable[[], str],
    in_flight: InFlight,
    answerer: Answerer | None = None,
    roots: RootsGetter | None = None,
    logs: LogSink | None = None,
) -> types.CallToolResult:
    """One `tools/call` with the backend's timeout. Cancelling the caller cancels the backend's call.
    The caller's trace context goes in the request's `_meta` (`traceparent`), so a backend that
    traces continues the task's trace.

    `stderr_hint` says what the backend's stderr last said; it is read only when the call fails (it reads the
    whole stderr tail). `in_flight`: the backend's calls that can take questions; `answerer`: who answers this one's
    (`questions.py`); without one, a backend that asks is told this client cannot answer. `roots`: what
    a 2026-07-28 backend's `roots/list` question is answered with (forwardRoots), else no roots. `logs`: where
    the backend's log messages during the call go; on a 2026-07-28 session its level goes in `_meta`.

    Raises:
        TaskTimeout, BackendError, BackendUnavailable, Denied; what the answerer raises (`questions.py`).
    """
    timeout = spec.timeout_seconds
    meta: types.RequestParamsMeta = {}
    propagate.inject(meta)
    if logs is not None and is_modern(session):
        meta[types.LOG_LEVEL_META_KEY] = logs.level  # type: ignore[literal-required]

    async def send(
        responses: types.InputResponses | None = None, state: str | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        params = types.CallToolRequestParams(
            name=tool, arguments=arguments, input_responses=responses, request_state=state, _meta=meta or None
        )
        return await session.send_request(types.CallToolRequest(params=params), _RESULT, progress_callback=progress)

    try:
        with in_flight.call(answerer, logs) as scope:
            with scope, anyio.fail_after(timeout):
                return await resolve(await send(), send, answerer, spec.id, roots)
        raise AssertionError("a call ended by a question raises as it leaves InFlight.call")
    except TimeoutError:
        raise TaskTimeout(
            f"{spec.id}.{tool} did not answer within {timeout:g} s and was cancelled. "
            f"If it needs longer, raise timeoutSeconds for backend {spec.id!r} in the config."
        ) from None
    except ValidationError as exc:
        raise BackendError(
            f"backend {spec.id!r} answered the call to {tool} with a malformed result: "
            f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}"
        ) from exc
    except MCPError as exc:
        raise await _call_failure(exc, link, spec, tool, stderr_hint) from exc


class ScopeStepUp(BackendUnavailable):
    """The OAuth server refused a call with 403 `insufficient_scope`: the token works, but this call needs more
    scope (what it asked for is kept with the tokens, `TokenFile.wanted_scope`)."""


async def _call_failure(
    exc: MCPError, link: Link, spec: BackendConfig, tool: str, stderr_hint: Callable[[], str]
) -> AgentifyError:
    if link.refused_status == 401:
        return refused(spec)
    if link.refused_status == 403 and spec.oauth:  # a scope step-up, which only a new authorization answers
        return ScopeStepUp(
            f"backend {spec.id!r} refused the call to {tool} (HTTP 403): when it asks for more scope, run "
            f"`agentify auth {spec.id}` (with the same --config) to authorize it, then try again."
        )
    if exc.error.code == types.CONNECTION_CLOSED or link.gone.is_set():
        if link.exit_code is None:
            with anyio.move_on_after(LINK_END_WAIT):
                await link.gone.wait()
            reason = link.lost_reason or "the connection closed"
            return BackendUnavailable(
                f"backend {spec.id!r} ({spec.where()}) went away during the call to {tool} ({reason}); "
                "it is reconnected on the next call."
            )
        code = await link.exit_code()
        return BackendError(
            f"backend {spec.id!r} exited during the call to {tool}"
            + (f" (exit code {code})" if code is not None else "")
            + f"; it will be restarted on the next call. {stderr_hint()}"
        )
    return BackendError(f"backend {spec.id!r} rejected the call to {tool}: {exc.error.message} (code {exc.error.code})")


def refused(spec: BackendConfig) -> BackendUnavailable:
    """The server answered HTTP 401: OAuth backends need the browser flow, others a right header or token."""
    if spec.oauth:
        return needs_auth(spec)
    return BackendUnavailable(
        f"backend {spec.id!r} ({spec.where()}) refused the credentials (HTTP 401): "
        "check its headers and auth.token in the config (and the variables they name)."
    )


def needs_auth(spec: BackendConfig) -> BackendUnavailable:
    return BackendUnavailable(
        f"backend {spec.id!r} needs authorization: run `agentify auth {spec.id}` (with the same --config), "
        "then try again."
    )


def unavailable(spec: BackendConfig, state: str, last_error: str | None) -> BackendUnavailable:
    """Why a call could not get a session: disabled, needs authorization, or not started in time."""
    if not spec.enabled:
        return BackendUnavailable(
            f"backend {spec.id!r} is disabled in the configuration; set enabled to true to use it"
        )
    if state == "needs_auth":
        return needs_auth(spec)
    detail = f": {last_error}" if last_error else ""
    check = "its url and headers" if spec.remote else "its command and arguments"
    return BackendUnavailable(
        f"backend {spec.id!r} is not available ({state}){detail}. "
        f"Check {check} with `agentify doctor`; it is retried on the next call."
    )


async def send_request(
    session: ClientSession, link: Link, spec: BackendConfig, request: types.ClientRequest, result_type: type[_R]
) -> _R:
    """A request other than a tool call (resources, prompts, completions) with the backend's timeout.

    Raises:
        MCPError: the backend's own answer (an unknown resource, a bad argument), to be relayed as it is.
        TaskTimeout, BackendError, BackendUnavailable.
    """
    timeout = spec.timeout_seconds
    try:
        with anyio.fail_after(timeout):
            return await session.send_request(request, result_type)
    except TimeoutError:
        raise TaskTimeout(
            f"{spec.id} did not answer {request.method} within {timeout:g} s. "
            f"If it needs longer, raise timeoutSeconds for backend {spec.id!r} in the config."
        ) from None
    except ValidationError as exc:
        raise BackendError(
            f"backend {spec.id!r} answered {request.method} with a malformed result: {exc.errors()[0]['msg']}"
        ) from exc
    except MCPError as exc:
        if link.refused_status == 401:
            raise refused(spec) from exc
        if exc.error.code == types.CONNECTION_CLOSED or link.gone.is_set():
            raise BackendUnavailable(
                f"backend {spec.id!r} went away while answering {request.method}; it is restarted on the next use."
            ) from exc
        raise
