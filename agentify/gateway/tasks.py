"""The task runner: validate input, plan, call the backend, trace every step.

Transport-agnostic: the MCP server, the `run` command and the console all come through
`TaskRunner.run`, so a task behaves the same whichever way it arrives. Each task is one span with a
span per step under it (`task_spans`); served over MCP it sits under the SDK's server span of the
request, so the client's `traceparent` is continued, and the backend call passes it on.

Raises `AgentifyError` subclasses (with `trace_id` set) for every failure a user can act on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from opentelemetry.trace import Span, SpanKind, Tracer, get_current_span
from opentelemetry.util.types import AttributeValue

from agentify.backends import BackendManager, ToolHandle
from agentify.backends.logs import LogSink
from agentify.backends.questions import Answerer
from agentify.errors import AgentifyError, Declined, Denied, InternalError, InvalidInput, InvalidPlan
from agentify.gateway.asked_arguments import completed
from agentify.gateway.inputs import SearchInput, given_call, validate_input
from agentify.gateway.policy import AskingClient, Confirmer, confirmation_reason, enforce
from agentify.gateway.progress import LatestProgress
from agentify.gateway.result_caps import block_size, cap_result
from agentify.gateway.settings import PlannerSlot
from agentify.gateway.task_spans import as_json, call_attributes, failed, plan_attributes, step, trace_id_of
from agentify.gateway.visible import CatalogViews, check_plan, check_unlisted, hidden_tool
from agentify.pinning import refusal
from agentify.planner import NeedsArguments, Plan, TaskContext, TaskInput
from agentify.planner.catalog import Catalog, MissingBackend
from agentify.planner.retrieval import Ranked
from agentify.planner.sampling import Sampler
from agentify.planner.search import search_tools
from agentify.security.redact import Redactor
from agentify.team import operations
from agentify.team.access import Access
from agentify.team.limits import Limiter
from agentify.telemetry.names import (
    BACKEND,
    CONFIRM_ANSWER,
    CONFIRM_REASON,
    OPERATION,
    PLAN,
    PLANNER,
    RESULT_CHARS,
    RESULT_CUT,
    SEARCH_TOOLS,
    TASK_INPUT,
    TASK_KIND,
    TOOL_ARGUMENTS,
    TOOL_ERROR,
    TOOL_NAME,
    TOOL_RESULT,
)

Progress = Callable[[str], Awaitable[None]]
PROGRESS_SETTLE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class TaskOutcome:
    plan: Plan
    trace_id: str | None  # None when tracing is off
    duration_ms: float
    result: types.CallToolResult | None = None  # None when only planned
    confirmation: str | None = None  # why the call needs the user's confirmation, if it does

    def plan_meta(self) -> dict[str, Any]:
        return {
            "backend": self.plan.backend,
            "tool": self.plan.tool,
            "arguments": self.plan.arguments,
            "planner": self.plan.planner,
            "traceId": self.trace_id,
            "durationMs": self.duration_ms,
        }


class TaskRunner:
    def __init__(
        self,
        manager: BackendManager,
        planners: PlannerSlot,
        tracer: Tracer,
        redactor: Redactor,
        max_query_chars: int,
        max_result_chars: int,
        max_context_chars: int = 20_000,
        limiter: Limiter | None = None,
        reading: Callable[[], bool] = lambda: True,
        access: Callable[[], Access] = lambda: Access(None),
    ) -> None:
        """`reading`: whether anything records spans now (`Telemetry.reading`); when nothing does, a task
        keeps its root span (its trace id) and skips the steps' spans and attributes. `access`: the
        `server.access` decisions in force (`AccessGate.current`)."""
        self.manager = manager
        self._reading = reading
        self.limiter = limiter
        self.planners = planners
        self.tracer = tracer
        self._redactor = redactor
        self.max_query_chars = max_query_chars
        self.max_context_chars = max_context_chars
        self.max_result_chars = max_result_chars
        self._catalog: tuple[Any, Catalog] | None = None
        self.access = access
        self._views = CatalogViews()

    async def catalog(self, *, everyone: bool = False) -> Catalog:
        """The tools of every usable backend (`BackendManager.catalog` waits, bounded, for starting ones),
        and the backends that offer none, so a planner can say so when a task is clearly for one.
        Only those the request's principal may see (`server.access`), unless `everyone`."""
        full = await self._full_catalog()
        return full if everyone else self._views.of(full, self.access())

    async def _full_catalog(self) -> Catalog:
        tools = await self.manager.catalog()
        if self._catalog is None or self._catalog[0] != (tools.key, tools.missing):
            # Rebuilt only when a backend's tools changed, so compiled argument validators are kept.
            missing = [MissingBackend(*m) for m in tools.missing]
            self._catalog = ((tools.key, tools.missing), Catalog.from_handles(tools.handles, missing))
        return self._catalog[1]

    async def run(
        self,
        raw_input: Any,
        *,
        execute: bool = True,
        progress: Progress | None = None,
        sampler: Sampler | None = None,
        confirmer: Confirmer | None = None,
        given: Plan | None = None,
        default_cwd: str | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
        asker: Answerer | None = None,
    ) -> TaskOutcome:
        """A task in words: validate, plan, (confirm, call).

        `given` is a plan chosen in an earlier round of the same `tools/call` (2026-07-28, where a
        confirmation is a round trip): it is checked against the catalog again instead of planning
        anew. `default_cwd` is the working directory of a task whose context names none (the
        client's first root). `answerer` answers the backend's own questions (`backend_questions.py`); `logs`
        hears the backend's log messages during its call. `asker` asks the user for the arguments the task does
        not say (`asked_arguments.py`; `answerer` when none, as an MCP client answers both)."""

        async def decide() -> Plan:
            with self._step("validate"):
                task = self._validate(raw_input, default_cwd)
            await _report(progress, "planning")
            return await self._plan(task, sampler, given, (asker or answerer) if execute else None)

        kind = "orchestrate" if execute else "plan"
        return await self._run(kind, raw_input, decide, execute, progress, confirmer, answerer, logs)

    async def call(
        self,
        raw_input: Any,
        *,
        progress: Progress | None = None,
        confirmer: Confirmer | None = None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> TaskOutcome:
        """`call_tool`: the IDE's model chose the tool and its arguments; all else is `run`'s path."""

        async def decide() -> Plan:
            with self._step("validate") as span:
                self.refuse_withheld(raw_input.get("name") if isinstance(raw_input, dict) else None)
                visible = await self.catalog()
                try:
                    plan = given_call(raw_input, visible)
                except InvalidInput:
                    name = raw_input.get("name") if isinstance(raw_input, dict) else None
                    everyone = await self.catalog(everyone=True)
                    hidden = hidden_tool(self.access(), name, everyone) if isinstance(name, str) else None
                    if hidden is not None:
                        self.access().check(hidden, {"arguments": raw_input.get("arguments")})
                    # A backend reached as each person lists no tools before someone authorized: its caller is
                    # asked to, and its tools are known from then on (the catalog below applies access again).
                    # Nobody is sent to authorize a backend server.access does not let them use: refused first.
                    called = _called_name(raw_input)
                    if not self.manager.learns_for_caller(called):
                        raise
                    check_unlisted(self.access(), called, raw_input.get("arguments"))
                    await self.manager.learn_for_caller(called, answerer)
                    plan = given_call(raw_input, await self.catalog())
                if span.is_recording():
                    span.set_attributes(
                        {BACKEND: plan.backend, TOOL_NAME: plan.tool, TOOL_ARGUMENTS: as_json(plan.arguments)}
                    )
            return plan

        return await self._run("call", raw_input, decide, True, progress, confirmer, answerer, logs)

    def refuse_withheld(self, name: Any) -> None:
        """Raises ToolChanged when `name` is a tool `pinning: enforce` withholds (a call would not find it)."""
        if isinstance(name, str) and (held := self.manager.withheld(name)) is not None:
            raise refusal(held, name)

    async def search(self, raw_input: Any) -> tuple[SearchInput, list[Ranked]]:
        """`search_tools`: the best-ranked tools for a query, by the index the planners use; traced."""
        with self._task("search", raw_input), self._step("search") as span:
            request = validate_input(SearchInput, raw_input, '{"query": "what to do", "limit": 5}')
            found = search_tools(self.planners.current.index(await self.catalog()), request.query, request.limit)
            span.set_attribute(SEARCH_TOOLS, [r.tool.name for r in found])
            return request, found

    async def _run(
        self,
        kind: str,
        raw_input: Any,
        decide: Callable[[], Awaitable[Plan]],
        execute: bool,
        progress: Progress | None,
        confirmer: Confirmer | None,
        answerer: Answerer | None = None,
        logs: LogSink | None = None,
    ) -> TaskOutcome:
        started = time.monotonic()
        with self._task(kind, raw_input) as trace_id:
            log = logger.bind(trace=trace_id)
            plan = await decide()
            if execute:  # the audit's target (also of a call server.access refuses)
                operations.reached(plan.backend, plan.tool, f"{plan.backend}__{plan.tool}")
            check_plan(self.access(), plan, await self.catalog(everyone=True))
            log.info("plan: {}.{} with {}", plan.backend, plan.tool, ", ".join(plan.arguments) or "no arguments")
            # Formatted only when debug lines are written; the sink masks, then cuts.
            log.opt(lazy=True).debug("plan arguments: {}", lambda: json.dumps(plan.arguments))
            reason = await self._confirmation_reason(plan, start=execute)
            result = None
            if execute:
                await self._confirm(plan, reason, confirmer)
                if self.limiter is not None:
                    await self.limiter.charge_backend(plan.backend)
                await _report(progress, f"calling {plan.backend}.{plan.tool}")
                result = await self._call(plan, progress, answerer, logs)
                await _report(progress, "done")
            return TaskOutcome(
                plan=plan,
                trace_id=trace_id,
                duration_ms=round((time.monotonic() - started) * 1000, 2),
                result=result,
                confirmation=reason,
            )

    @contextmanager
    def _task(self, kind: str, raw_input: Any) -> Iterator[str | None]:
        """The task's root span; yields its trace id. Every failure leaves with that id set, a bug as
        `InternalError` (its traceback logged once, here)."""
        attributes: dict[str, AttributeValue] = {TASK_KIND: kind}
        if self._reading():
            attributes[TASK_INPUT] = as_json(_as_dict(raw_input))
        with step(self.tracer, kind, attributes=attributes) as span:
            trace_id = trace_id_of(span)
            log = logger.bind(trace=trace_id)
            try:
                yield trace_id
            except AgentifyError as exc:
                exc.trace_id = trace_id
                level = "INFO" if isinstance(exc, Declined) else "WARNING"  # the user's no is no failure
                log.log(level, "task failed ({}): {}", exc.code, exc.message)
                raise
            except AskingClient as asking:
                asking.trace_id = trace_id
                log.info("waiting for the client to answer: {}", asking.what)
                raise
            except anyio.get_cancelled_exc_class():
                log.info("task cancelled by the client")
                raise
            except Exception as exc:  # a bug must still end its trace and answer as an error
                log.opt(exception=exc).error("task failed unexpectedly")
                error = InternalError(
                    f"agentify itself failed ({type(exc).__name__}: {exc}); this is a bug in agentify, "
                    f"not in your backend. Its log has the details under trace {trace_id}; please report it."
                )
                error.trace_id = trace_id
                raise error from exc

    def _step(
        self,
        name: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Callable[[], dict[str, AttributeValue]] | None = None,
    ) -> AbstractContextManager[Span]:
        """A step's span (`task_spans.step`) while anything reads spans; else the task's own span stands
        in, recording nothing, and `attributes` is never called."""
        if not self._reading():
            return nullcontext(get_current_span())
        return step(self.tracer, name, kind=kind, attributes=attributes() if attributes else None)

    def _validate(self, raw_input: Any, default_cwd: str | None = None) -> TaskInput:
        task = validate_input(TaskInput, raw_input, '{"query": "what to do", "context": {...}}')
        if default_cwd and not (task.context and task.context.current_working_directory):
            context = task.context or TaskContext()
            context = context.model_copy(update={"current_working_directory": default_cwd})
            task = task.model_copy(update={"context": context})
        if not task.query.strip():
            raise InvalidInput("the query is empty: say what to do, for example 'read README.md'")
        if len(task.query) > self.max_query_chars:
            raise InvalidInput(
                f"the query is {len(task.query)} characters long; the limit is {self.max_query_chars}. "
                "Shorten it, or put long content in a file and name the file in the task."
            )
        selection = task.context.selection_text if task.context else None
        if task.context and selection and len(selection) > self.max_context_chars:
            limit = self.max_context_chars
            cut = (
                selection[:limit]
                + f"\n[... selection cut: {len(selection)} characters in all; maxContextChars is {limit}]"
            )
            task = task.model_copy(update={"context": task.context.model_copy(update={"selection_text": cut})})
        return task

    async def _confirmation_reason(self, plan: Plan, *, start: bool) -> str | None:
        """Decided on the tool as the running backend lists it; a call (`start`) brings the backend up first,
        as the call would, so a plan from the cached manifest is checked against the live list.

        Raises:
            BackendUnavailable: the backend cannot be started.
        """
        handle = plan.handle
        if handle is None:
            return None
        listed = await handle.live() if start else handle.listed()
        return confirmation_reason(handle.spec, handle.origin, listed)

    async def _confirm(self, plan: Plan, reason: str | None, confirmer: Confirmer | None) -> None:
        if reason is None:
            return
        with self._step("confirm", attributes=lambda: {CONFIRM_REASON: reason}) as span:
            try:
                await enforce(plan, _handle(plan).spec, reason, confirmer)
            except Denied:
                operations.decided("declined")
                raise
            operations.decided("confirmed")
            span.set_attribute(CONFIRM_ANSWER, "accept")

    async def _plan(
        self, task: TaskInput, sampler: Sampler | None, given: Plan | None = None, asker: Answerer | None = None
    ) -> Plan:
        """`asker`: who asks the user for arguments the task does not say (`asked_arguments`); none for a plan
        that is only shown (`plan_task`): its `no_plan` names them."""
        with self._step("plan", attributes=lambda: {OPERATION: PLAN}) as span:
            catalog = await self.catalog()
            if given is None:
                planner = self.planners.current.choose(sampler=sampler)
                span.set_attribute(PLANNER, planner.name)
                try:
                    plan = await planner.plan(task, catalog)
                except NeedsArguments as unfilled:
                    plan = await completed(unfilled, catalog, asker)
            else:  # chosen in an earlier round: the tools may have changed since
                span.set_attribute(PLANNER, f"{given.planner} (planned in an earlier round)")
                plan = given
            if plan.handle is None:  # planned in an earlier round: resolved against today's catalog
                self.refuse_withheld(f"{plan.backend}__{plan.tool}")
                plan = _resolved(plan, catalog)
            if span.is_recording():
                span.set_attributes(plan_attributes(plan))
        return plan

    async def _call(
        self, plan: Plan, report: Progress | None, answerer: Answerer | None, logs: LogSink | None
    ) -> types.CallToolResult:
        handle = _handle(plan)

        forward: LatestProgress | None = None  # made when the backend first reports: most calls never do

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            nonlocal forward
            if report is not None:
                forward = forward or LatestProgress(report)
                done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
                await forward(f"{plan.backend}.{plan.tool}: {message or 'working'} ({done})")

        name, attributes = f"tools/call {handle.origin}", lambda: call_attributes(plan, handle)
        with self._step(name, kind=SpanKind.CLIENT, attributes=attributes) as span:
            try:
                # The backend is asked for progress only when someone hears it.
                result = await handle.call(plan.arguments, relay if report else None, answerer, logs)
                operations.answered()
            except AskingClient as asking:  # 2026-07-28: a backend's question, answered in the client's next round
                asking.plan = plan
                raise
            if forward is not None:
                with anyio.move_on_after(PROGRESS_SETTLE_SECONDS):  # the last report before "done"
                    await forward.settled()
            capped = cap_result(result, self.max_result_chars, lambda text: self._redactor.text(text, patterns=False))
            if span.is_recording():
                size = sum(block_size(block) for block in result.content)
                cut = capped is not result
                span.set_attributes({RESULT_CHARS: size, RESULT_CUT: cut, TOOL_RESULT: _preview(result)})
            if result.is_error:  # the conventions' tool_error; the task itself succeeded
                failed(span, TOOL_ERROR)
        return capped


def _resolved(plan: Plan, catalog: Catalog) -> Plan:
    """A plan without its tool handle (chosen in an earlier round of the call, or by a planner that did
    not set it), resolved against today's catalog, its arguments checked again.

    Raises:
        InvalidPlan: the tool is gone, or its schema no longer accepts the arguments.
    """
    tool = catalog.find(plan.backend, plan.tool)
    if tool is None:
        raise InvalidPlan(f"the planner chose {plan.backend}.{plan.tool}, which is not in the catalog")
    if (problem := tool.validation_error(plan.arguments)) is not None:
        raise InvalidPlan(f"{plan.backend}.{plan.tool} changed its schema since it was planned: {problem}")
    return dataclasses.replace(plan, handle=tool.handle)


def _handle(plan: Plan) -> ToolHandle:
    if plan.handle is None:
        raise InvalidPlan(f"the planner chose {plan.backend}.{plan.tool}, which is not in the catalog")
    return plan.handle


def _called_name(raw: Any) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) else ""


def _preview(result: types.CallToolResult) -> str:
    """The result's text for the span: each sink redacts it and then cuts it to a preview."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _as_dict(raw: Any) -> dict[str, Any]:
    return dict(raw) if isinstance(raw, dict) else {"input": repr(raw)[:10_000]}


async def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        await progress(message)
