"""The task runner: validate input, plan, call the backend, trace every step.

Transport-agnostic: the MCP server, the `run` command and the console all come through
`TaskRunner.run`, so a task behaves the same whichever way it arrives.

Raises `AgentifyError` subclasses (with `trace_id` set) for every failure a user can act on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from loguru import logger
from pydantic import ValidationError

from agentify.backends import BackendManager, ToolHandle
from agentify.errors import AgentifyError, InternalError, InvalidInput, InvalidPlan, TaskCancelled
from agentify.limits import block_size, cap_result
from agentify.planner import Plan, TaskInput
from agentify.planner.catalog import Catalog
from agentify.planner.sampling import Sampler
from agentify.planner.select import PlannerSelector
from agentify.policy import Confirmer, confirmation_reason, enforce
from agentify.traces import TraceStore

Progress = Callable[[str], Awaitable[None]]


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
        planners: PlannerSelector,
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
        self._catalog: tuple[tuple[tuple[str, str, int], ...], Catalog] | None = None

    async def catalog(self) -> Catalog:
        """The tools of every usable backend (`BackendManager.catalog` waits, bounded, for starting ones)."""
        tools = await self.manager.catalog()
        if self._catalog is None or self._catalog[0] != tools.key:
            # Rebuilt only when a backend's tools changed, so compiled argument validators are kept.
            self._catalog = (tools.key, Catalog.from_handles(tools.handles))
        return self._catalog[1]

    async def run(
        self,
        raw_input: Any,
        *,
        execute: bool = True,
        progress: Progress | None = None,
        sampler: Sampler | None = None,
        confirmer: Confirmer | None = None,
    ) -> TaskOutcome:
        trace = self.traces.start("orchestrate" if execute else "plan", _as_dict(raw_input))
        started = time.monotonic()
        log = logger.bind(trace=trace.id)
        try:
            span = self.traces.span(trace, "validate")
            try:
                task = self._validate(raw_input)
            except InvalidInput as exc:
                self.traces.end_span(trace, span, error=exc.message)
                raise
            self.traces.end_span(trace, span)

            await _report(progress, "planning")
            plan = await self._plan(task, trace, sampler)
            log.info("plan: {}.{} with {}", plan.backend, plan.tool, ", ".join(plan.arguments) or "no arguments")
            log.debug("plan arguments: {}", json.dumps(plan.arguments))  # the sink masks, then cuts
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
            log.warning("task failed ({}): {}", exc.code, exc.message)
            self.traces.finish(trace, exc.code, exc.message)
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

    def _validate(self, raw_input: Any) -> TaskInput:
        try:
            task = TaskInput.model_validate(raw_input)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise InvalidInput(
                f'invalid task input: {problems}. Send {{"query": "what to do", "context": {{...}}}}.'
            ) from None
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
        self.traces.end_span(trace, span, reason=reason, answer="accept")

    async def _plan(self, task: TaskInput, trace: Any, sampler: Sampler | None) -> Plan:
        span = self.traces.span(trace, "plan")
        try:
            planner = self.planners.choose(sampler=sampler)
            span.attributes["provider"] = planner.name
            catalog = await self.catalog()
            plan = await planner.plan(task, catalog)
            _handle(plan)
        except AgentifyError as exc:
            self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}")
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

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
            await _report(report, f"{plan.backend}.{plan.tool}: {message or 'working'} ({done})")

        try:
            result = await _handle(plan).call(plan.arguments, relay)
        except AgentifyError as exc:
            self.traces.end_span(trace, span, error=f"{exc.code}: {exc.message}")
            raise
        except anyio.get_cancelled_exc_class():
            self.traces.end_span(trace, span, error="cancelled")
            raise
        size = sum(block_size(block) for block in result.content)
        capped = cap_result(result, self.max_result_chars)
        self.traces.end_span(
            trace,
            span,
            resultChars=size,
            cut=capped is not result,
            isError=bool(result.is_error),
            result=_preview(result),
        )
        return capped


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
