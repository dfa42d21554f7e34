"""The task runner: validate input, plan, call the backend, trace every step.

Transport-agnostic: the MCP server, the `run` command and the console all come through
`TaskRunner.run`, so a task behaves the same whichever way it arrives.

Raises `AgentifyError` subclasses (with `trace_id` set) for every failure a user can act on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from loguru import logger

from agentify.backends import BackendManager, ToolHandle
from agentify.errors import AgentifyError, Declined, InternalError, InvalidInput, InvalidPlan, TaskCancelled
from agentify.gateway.inputs import SearchInput, given_call, validate_input
from agentify.gateway.policy import AskingClient, Confirmer, confirmation_reason, enforce
from agentify.gateway.progress import LatestProgress
from agentify.gateway.result_caps import block_size, cap_result
from agentify.gateway.settings import PlannerSlot
from agentify.gateway.traces import Trace, TraceStore
from agentify.planner import Plan, TaskContext, TaskInput
from agentify.planner.catalog import Catalog, MissingBackend
from agentify.planner.retrieval import Ranked
from agentify.planner.sampling import Sampler
from agentify.planner.search import search_tools

Progress = Callable[[str], Awaitable[None]]
PROGRESS_SETTLE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class TaskOutcome:
    plan: Plan
    trace_id: str
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
        traces: TraceStore,
        max_query_chars: int,
        max_result_chars: int,
        max_context_chars: int = 20_000,
    ) -> None:
        self.manager = manager
        self.planners = planners
        self.traces = traces
        self.max_query_chars = max_query_chars
        self.max_context_chars = max_context_chars
        self.max_result_chars = max_result_chars
        self._catalog: tuple[Any, Catalog] | None = None

    async def catalog(self) -> Catalog:
        """The tools of every usable backend (`BackendManager.catalog` waits, bounded, for starting ones),
        and the backends that offer none, so a planner can say so when a task is clearly for one."""
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
    ) -> TaskOutcome:
        """A task in words: validate, plan, (confirm, call).

        `given` is a plan chosen in an earlier round of the same `tools/call` (2026-07-28, where a
        confirmation is a round trip): it is checked against the catalog again instead of planning
        anew. `default_cwd` is the working directory of a task whose context names none (the
        client's first root)."""

        async def decide(trace: Trace) -> Plan:
            span = self.traces.span(trace, "validate")
            try:
                task = self._validate(raw_input, default_cwd)
            except InvalidInput as exc:
                self.traces.end_span(trace, span, error=exc.message)
                raise
            self.traces.end_span(trace, span)
            await _report(progress, "planning")
            return await self._plan(task, trace, sampler, given)

        return await self._run("orchestrate" if execute else "plan", raw_input, decide, execute, progress, confirmer)

    async def call(
        self, raw_input: Any, *, progress: Progress | None = None, confirmer: Confirmer | None = None
    ) -> TaskOutcome:
        """`call_tool`: the IDE's model chose the tool and its arguments; all else is `run`'s path."""

        async def decide(trace: Trace) -> Plan:
            span = self.traces.span(trace, "validate")
            try:
                plan = given_call(raw_input, await self.catalog())
            except InvalidInput as exc:
                self.traces.end_span(trace, span, error=exc.message)
                raise
            self.traces.end_span(trace, span, backend=plan.backend, tool=plan.tool, arguments=plan.arguments)
            return plan

        return await self._run("call", raw_input, decide, True, progress, confirmer)

    async def search(self, raw_input: Any) -> tuple[SearchInput, list[Ranked]]:
        """`search_tools`: the best-ranked tools for a query, by the index the planners use; traced."""
        trace = self.traces.start("search", _as_dict(raw_input))
        try:
            span = self.traces.span(trace, "search")
            try:
                request = validate_input(SearchInput, raw_input, '{"query": "what to do", "limit": 5}')
                found = search_tools(self.planners.current.index(await self.catalog()), request.query, request.limit)
            except AgentifyError as exc:
                self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}")
                raise
            self.traces.end_span(trace, span, tools=[r.tool.name for r in found])
            self.traces.finish(trace)
            return request, found
        except AgentifyError as exc:
            exc.trace_id = trace.id
            self.traces.finish(trace, exc.code, exc.message)
            raise
        except anyio.get_cancelled_exc_class():
            self.traces.finish(trace, TaskCancelled.code, "cancelled by the client")
            raise

    async def _run(
        self,
        kind: str,
        raw_input: Any,
        decide: Callable[[Trace], Awaitable[Plan]],
        execute: bool,
        progress: Progress | None,
        confirmer: Confirmer | None,
    ) -> TaskOutcome:
        trace = self.traces.start(kind, _as_dict(raw_input))
        started = time.monotonic()
        log = logger.bind(trace=trace.id)
        try:
            plan = await decide(trace)
            log.info("plan: {}.{} with {}", plan.backend, plan.tool, ", ".join(plan.arguments) or "no arguments")
            # Formatted only when debug lines are written; the sink masks, then cuts.
            log.opt(lazy=True).debug("plan arguments: {}", lambda: json.dumps(plan.arguments))
            reason = self._confirmation_reason(plan)
            result = None
            if execute:
                await self._confirm(plan, reason, confirmer, trace)
                await _report(progress, f"calling {plan.backend}.{plan.tool}")
                result = await self._call(plan, trace, progress)
                await _report(progress, "done")
            outcome = TaskOutcome(
                plan=plan,
                trace_id=trace.id,
                duration_ms=round((time.monotonic() - started) * 1000, 2),
                result=result,
                confirmation=reason,
            )
            self.traces.finish(trace)
            return outcome
        except AgentifyError as exc:
            exc.trace_id = trace.id
            log.log("INFO" if isinstance(exc, Declined) else "WARNING", "task failed ({}): {}", exc.code, exc.message)
            self.traces.finish(trace, exc.code, exc.message)
            raise
        except AskingClient as asking:
            asking.trace_id = trace.id
            log.info("waiting for the client to answer: {}", asking.what)
            self.traces.finish(trace, status="waiting", error_message=f"waiting for the client: {asking.what}")
            raise
        except anyio.get_cancelled_exc_class():
            log.info("task cancelled by the client")
            self.traces.finish(trace, TaskCancelled.code, "cancelled by the client")
            raise
        except Exception as exc:  # a bug must still end its trace and answer as an error
            log.opt(exception=exc).error("task failed unexpectedly")
            error = InternalError(
                f"agentify itself failed ({type(exc).__name__}: {exc}); this is a bug in agentify, "
                f"not in your backend. Its log has the details under trace {trace.id}; please report it."
            )
            error.trace_id = trace.id
            self.traces.finish(trace, error.code, error.message)
            raise error from exc

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

    def _confirmation_reason(self, plan: Plan) -> str | None:
        return confirmation_reason(plan.handle.spec, plan.handle.tool) if plan.handle is not None else None

    async def _confirm(self, plan: Plan, reason: str | None, confirmer: Confirmer | None, trace: Any) -> None:
        if reason is None:
            return
        span = self.traces.span(trace, "confirm")
        try:
            await enforce(plan, _handle(plan).spec, reason, confirmer)
        except AgentifyError as exc:
            self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}", reason=reason)
            raise
        except AskingClient as asking:  # 2026-07-28: the answer comes with the client's next round
            self.traces.end_span(trace, span, reason=reason, answer=f"asked the client for {asking.what}")
            raise
        self.traces.end_span(trace, span, reason=reason, answer="accept")

    async def _plan(self, task: TaskInput, trace: Any, sampler: Sampler | None, given: Plan | None = None) -> Plan:
        span = self.traces.span(trace, "plan")
        try:
            catalog = await self.catalog()
            if given is None:
                planner = self.planners.current.choose(sampler=sampler)
                span.attributes["provider"] = planner.name
                plan = await planner.plan(task, catalog)
            else:  # chosen in an earlier round: the tools may have changed since
                span.attributes["provider"] = f"{given.planner} (planned in an earlier round)"
                plan = given
            if plan.handle is None:  # planned in an earlier round: resolved against today's catalog
                plan = _resolved(plan, catalog)
        except AgentifyError as exc:
            self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}")
            raise
        except AskingClient as asking:  # 2026-07-28: the planner's model answers in the client's next round
            self.traces.end_span(trace, span, waiting=f"asked the client for {asking.what}")
            raise
        usage = plan.usage
        self.traces.end_span(
            trace,
            span,
            model=usage.model,
            promptTokens=usage.prompt_tokens,
            completionTokens=usage.completion_tokens,
            requests=usage.requests,
            toolsOffered=usage.tools_offered,
            backend=plan.backend,
            tool=plan.tool,
            arguments=plan.arguments,
        )
        return plan

    async def _call(self, plan: Plan, trace: Any, report: Progress | None) -> types.CallToolResult:
        span = self.traces.span(trace, "call")
        span.attributes.update(backend=plan.backend, tool=plan.tool)

        forward = LatestProgress(report) if report is not None else None

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            if forward is not None:
                done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
                await forward(f"{plan.backend}.{plan.tool}: {message or 'working'} ({done})")

        try:
            result = await _handle(plan).call(plan.arguments, relay)
            if forward is not None:
                with anyio.move_on_after(PROGRESS_SETTLE_SECONDS):  # the last report before "done"
                    await forward.settled()
        except AgentifyError as exc:
            self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}")
            raise
        except anyio.get_cancelled_exc_class():
            self.traces.end_span(trace, span, error="cancelled")
            raise
        size = sum(block_size(block) for block in result.content)
        capped = cap_result(result, self.max_result_chars, self.traces.mask_literal)
        self.traces.end_span(
            trace,
            span,
            resultChars=size,
            cut=capped is not result,
            isError=bool(result.is_error),
            result=_preview(result),
        )
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


def _preview(result: types.CallToolResult) -> str:
    """The result's text for the trace, which redacts it and then cuts it to a preview."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _as_dict(raw: Any) -> dict[str, Any]:
    return dict(raw) if isinstance(raw, dict) else {"input": repr(raw)[:10_000]}


async def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        await progress(message)
