"""`agentify eval`: how well the planner routes a labelled set of tasks on the real tool lists.

Each line of the file is `{"query": str, "context": {...}?, "expect": {"backend": str, "tool": str,
"arguments": {...}?}}`, where `tool` may list alternatives separated by `|`. Nothing is executed:
every case is only planned. Relative paths in a context (the working directory, or an
`activeDocumentURI` written as a plain path) resolve against the eval's working directory, which
is also the working directory of a case that gives none.

- top-1 accuracy: the plan's backend and tool are expected, and every expected argument value is
  in the plan (an object's expected keys; a list's items in any order; a relative path equal to
  the plan's absolute one, resolved against the case's working directory);
- a refusal that would ask the user for arguments the task does not say (`NeedsArguments`: the offline planner
  is sure of the tool) counts as refused, and says which tool it chose and whether that is the expected one;
- shortlist recall at k: the expected tool is among those a model planner is offered (`shortlist`);
- mean prompt tokens and latency of the planner, and, since a model planner's request grows with
  every tool offered, its estimated size with the shortlist and with every tool.

Raises `EvalFileError` for a file that cannot be used (with its line number).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from pydantic import ValidationError

from agentify.errors import AgentifyError, NoPlan, PlannerUnavailable
from agentify.gateway.services import TaskServices
from agentify.planner import NeedsArguments, Plan, Planner, TaskInput
from agentify.planner.catalog import Catalog
from agentify.planner.openai import estimate_prompt_tokens
from agentify.planner.retrieval import ToolIndex
from agentify.planner.shortlist import shortlist

if TYPE_CHECKING:
    from agentify.gateway.settings import PlannerSlot

Backends = Sequence[tuple[str, str, list[types.Tool]]]
PREVIEW = 240


class EvalFileError(Exception):
    """The eval file or the extra tools file cannot be used; the message says where and why."""


@dataclass(frozen=True, kw_only=True)
class Case:
    line: int
    task: TaskInput
    backend: str
    tools: tuple[str, ...]
    arguments: dict[str, Any]

    def expected(self) -> dict[str, Any]:
        return {"backend": self.backend, "tool": "|".join(self.tools), "arguments": self.arguments}


def load_cases(path: Path, cwd: str) -> list[Case]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EvalFileError(f"{path} cannot be read: {exc.strerror}") from None
    cases = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            cases.append(_case(path, number, line, cwd))
    if not cases:
        raise EvalFileError(f"{path} holds no cases: write one JSON object per line")
    return cases


def _case(path: Path, number: int, line: str, cwd: str) -> Case:
    where = f"{path}:{number}"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EvalFileError(f"{where}: not valid JSON ({exc.msg})") from None
    expect = item.get("expect") if isinstance(item, dict) else None
    if not isinstance(expect, dict) or not isinstance(expect.get("backend"), str) or not expect.get("tool"):
        raise EvalFileError(f'{where}: needs "expect": {{"backend": str, "tool": str, "arguments": {{...}}?}}')
    context = dict(item.get("context") or {})
    working = os.path.join(cwd, context.get("currentWorkingDirectory") or ".")
    context["currentWorkingDirectory"] = os.path.normpath(working)
    document = context.get("activeDocumentURI")
    if isinstance(document, str) and not document.startswith("file:") and "://" not in document:
        context["activeDocumentURI"] = Path(os.path.join(cwd, document)).resolve().as_uri()
    try:
        task = TaskInput.model_validate({"query": item.get("query"), "context": context})
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))
        raise EvalFileError(f"{where}: {problem}") from None
    arguments = expect.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise EvalFileError(f"{where}: expect.arguments must be an object")
    tools = tuple(t.strip() for t in str(expect["tool"]).split("|") if t.strip())
    return Case(line=number, task=task, backend=expect["backend"], tools=tools, arguments=arguments)


def load_backends(path: Path) -> Backends:
    """Recorded or synthetic backends: `{"backends": [{"id", "description", "tools": [<MCP Tool>...]}]}`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [
            (str(b["id"]), str(b.get("description") or ""), [types.Tool.model_validate(t) for t in b["tools"]])
            for b in data["backends"]
        ]
    except OSError as exc:
        raise EvalFileError(f"{path} cannot be read: {exc.strerror}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
        raise EvalFileError(
            f"{path} is not a tools file ({type(exc).__name__}: {str(exc)[:200]}); expected "
            '{"backends": [{"id": ..., "description": ..., "tools": [...]}]}'
        ) from None


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    case: Case
    plan: Plan | None
    error: AgentifyError | None
    correct: bool
    shortlisted: bool
    latency_ms: float
    estimated_tokens: int
    """The estimated prompt tokens of a model planner's request offering the shortlist."""
    estimated_all_tokens: int
    """The same offering every tool."""

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "refused" if isinstance(self.error, PlannerUnavailable | NoPlan) else self.error.code
        return "ok" if self.correct else "wrong"

    @property
    def asks(self) -> NeedsArguments | None:
        """The refusal that would ask the user for arguments, if it is one."""
        return self.error if isinstance(self.error, NeedsArguments) else None

    @property
    def asks_right_tool(self) -> bool:
        asks = self.asks
        return asks is not None and asks.plan.backend == self.case.backend and asks.plan.tool in self.case.tools

    def as_dict(self) -> dict[str, Any]:
        plan = self.plan
        usage = plan.usage if plan is not None else None
        return {
            "line": self.case.line,
            "query": self.case.task.query,
            "expected": self.case.expected(),
            "verdict": self.verdict,
            "correct": self.correct,
            "shortlisted": self.shortlisted,
            "plan": None
            if plan is None
            else {"backend": plan.backend, "tool": plan.tool, "arguments": plan.arguments, "planner": plan.planner},
            "error": None if self.error is None else {"code": self.error.code, "message": self.error.message},
            "asks": None if (ask := self.asks) is None else ask.missing.meta() | {"expectedTool": self.asks_right_tool},
            "promptTokens": usage.prompt_tokens if usage else 0,
            "toolsOffered": usage.tools_offered if usage else 0,
            "latencyMs": round(self.latency_ms, 2),
            "estimatedPromptTokens": self.estimated_tokens,
        }


@dataclass(frozen=True, kw_only=True)
class Report:
    planner: str
    """Which planner answered, and why."""
    results: list[CaseResult]
    shortlist_k: int
    catalog_size: int
    backends: dict[str, int]
    """Tools per backend in the catalog."""
    unavailable: list[str]
    """Configured backends whose tools are missing, with the reason."""

    @property
    def accuracy(self) -> float:
        return _mean([r.correct for r in self.results])

    @property
    def shortlist_recall(self) -> float:
        return _mean([r.shortlisted for r in self.results])

    @property
    def mean_prompt_tokens(self) -> float:
        return _mean([r.plan.usage.prompt_tokens if r.plan else 0 for r in self.results])

    @property
    def mean_latency_ms(self) -> float:
        return _mean([r.latency_ms for r in self.results])

    def as_json(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "shortlistRecall": self.shortlist_recall,
            "shortlistK": self.shortlist_k,
            "meanPromptTokens": round(self.mean_prompt_tokens, 1),
            "meanLatencyMs": round(self.mean_latency_ms, 2),
            "estimatedPromptTokens": {
                "shortlist": round(_mean([r.estimated_tokens for r in self.results])),
                "allTools": round(_mean([r.estimated_all_tokens for r in self.results])),
                "method": "request JSON length / 4",
            },
            "planner": self.planner,
            "catalogTools": self.catalog_size,
            "backends": self.backends,
            "unavailableBackends": self.unavailable,
            "asks": {
                "expectedTool": sum(r.asks_right_tool for r in self.results),
                "otherTool": sum(r.asks is not None and not r.asks_right_tool for r in self.results),
            },
            "results": [r.as_dict() for r in self.results],
        }

    def lines(self) -> list[str]:
        out = [f"planner: {self.planner}"]
        per_backend = ", ".join(f"{b} {n}" for b, n in self.backends.items())
        out.append(f"catalog: {self.catalog_size} tools ({per_backend}); shortlist k = {self.shortlist_k}")
        out += [f"warning: backend {u}; its cases cannot be planned right" for u in self.unavailable]
        out.append("")
        for r in self.results:
            out.append(f"{r.case.line:>3}  {r.verdict:<8} {r.case.task.query}")
            if r.plan is not None:
                out.append(f"     -> {r.plan.backend}.{r.plan.tool} {json.dumps(r.plan.arguments)}")
            elif (asks := r.asks) is not None:
                missing = ", ".join(asks.missing.arguments)
                out.append(f"     -> asks the user for {missing} of {asks.plan.backend}.{asks.plan.tool}")
            elif r.error is not None:
                message = r.error.message
                out.append(f"     -> {r.error.code}: {message[:PREVIEW]}{'...' if len(message) > PREVIEW else ''}")
            if not r.correct:
                expected = " ".join([f"{r.case.backend}.{'|'.join(r.case.tools)}", json.dumps(r.case.arguments)])
                missed = "" if r.shortlisted else "; NOT in the shortlist"
                out.append(f"     expected {expected}{missed}")
        total = len(self.results)
        correct = sum(r.correct for r in self.results)
        listed = sum(r.shortlisted for r in self.results)
        refused = sum(r.verdict == "refused" for r in self.results)
        wrong = total - correct - refused
        asking = sum(r.asks is not None for r in self.results)
        right_tool = sum(r.asks_right_tool for r in self.results)
        of_them = f", {asking} of them asking for arguments ({right_tool} of the expected tool)" if asking else ""
        shortlist_tokens = _mean([r.estimated_tokens for r in self.results])
        all_tokens = _mean([r.estimated_all_tokens for r in self.results])
        saving = f" ({1 - shortlist_tokens / all_tokens:.0%} fewer)" if all_tokens else ""
        out += [
            "",
            f"top-1 accuracy: {correct}/{total} = {self.accuracy:.1%} ({refused} refused{of_them}, {wrong} wrong)",
            f"shortlist recall at {self.shortlist_k}: {listed}/{total} = {self.shortlist_recall:.1%}",
            f"mean prompt tokens: {self.mean_prompt_tokens:.0f}"
            + (" (this planner sends no model request)" if self.mean_prompt_tokens == 0 else ""),
            f"mean latency: {self.mean_latency_ms:.1f} ms",
            f"model request size, estimated (JSON length / 4, no tokenizer): {shortlist_tokens:.0f} tokens with the "
            f"shortlist against {all_tokens:.0f} with all {self.catalog_size} tools{saving}",
        ]
        return out


async def evaluate(
    planner: Planner, index: ToolIndex, cases: Iterable[Case], k: int, *, description: str = ""
) -> Report:
    """Plans every case with `planner` on the index's catalog; never executes anything."""
    catalog = index.catalog
    results = []
    for case in cases:
        started = time.perf_counter()
        plan: Plan | None = None
        error: AgentifyError | None = None
        try:
            plan = await planner.plan(case.task, catalog)
        except AgentifyError as exc:
            error = exc
        latency = (time.perf_counter() - started) * 1000
        offered = shortlist(index, case.task, k)
        cwd = case.task.context.current_working_directory if case.task.context else None
        results.append(
            CaseResult(
                case=case,
                plan=plan,
                error=error,
                correct=plan is not None and _plan_matches(case, plan, cwd),
                shortlisted=any(t.backend == case.backend and t.tool.name in case.tools for t in offered),
                latency_ms=latency,
                estimated_tokens=estimate_prompt_tokens(case.task, offered),
                estimated_all_tokens=estimate_prompt_tokens(case.task, list(catalog.tools.values())),
            )
        )
    backends: dict[str, int] = {}
    for tool in catalog.tools.values():
        backends[tool.backend] = backends.get(tool.backend, 0) + 1
    return Report(
        planner=description or planner.name,
        results=results,
        shortlist_k=k,
        catalog_size=len(catalog),
        backends=backends,
        unavailable=[],
    )


class EvalServices(TaskServices, Protocol):
    """What `agentify eval` uses of the gateway's services (`gateway.services.Services`)."""

    @property
    def planners(self) -> PlannerSlot: ...


async def gateway_catalog(gateway: EvalServices, extra: Backends) -> Catalog:
    """The gateway's catalog (its backends started) plus `extra` recorded backends.

    Raises:
        EvalFileError: an extra backend has the id of a configured one.
    """
    catalog = await gateway.runner.catalog()
    if not extra:
        return catalog
    configured = _by_backend(catalog)
    clash = sorted({bid for bid, _, _ in extra} & {bid for bid, _, _ in configured})
    if clash:
        raise EvalFileError(f"the extra tools use backend ids that are configured already: {', '.join(clash)}")
    return Catalog.build([*configured, *extra], catalog.missing)


async def evaluate_gateway(gateway: EvalServices, cases: Sequence[Case], extra: Backends = ()) -> Report:
    """`evaluate` on the gateway's backends (started by it), plus `extra` recorded backends.

    Raises:
        PlannerUnavailable: the configured planner cannot be used here (for example sampling: no client).
        EvalFileError: an extra backend has the id of a configured one.
    """
    catalog = await gateway_catalog(gateway, extra)
    planners, config, status = gateway.planners.current, gateway.settings.current, gateway.status()
    planner = planners.choose()
    index = planners.index(catalog)
    k = config.planner.shortlist
    report = await evaluate(planner, index, cases, k, description=status.planner.reason)
    unavailable = [
        f"{s.id} is {s.state.value}" + (f": {s.last_error}" if s.last_error else "")
        for s, spec in zip(status.backends, config.backends, strict=True)
        if spec.enabled and s.id not in report.backends
    ]
    return replace(report, unavailable=unavailable)


def _by_backend(catalog: Catalog) -> list[tuple[str, str, list[types.Tool]]]:
    grouped: dict[str, tuple[str, list[types.Tool]]] = {}
    for tool in catalog.tools.values():
        grouped.setdefault(tool.backend, (tool.backend_description, []))[1].append(tool.tool)
    return [(bid, desc, tools) for bid, (desc, tools) in grouped.items()]


def _plan_matches(case: Case, plan: Plan, cwd: str | None) -> bool:
    return plan.backend == case.backend and plan.tool in case.tools and _present(case.arguments, plan.arguments, cwd)


def _present(expected: Any, actual: Any, cwd: str | None) -> bool:
    """Whether `expected` is in `actual` (see the module docstring)."""
    if isinstance(expected, dict):
        pairs = expected.items()
        return isinstance(actual, dict) and all(k in actual and _present(v, actual[k], cwd) for k, v in pairs)
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return False
        remaining = list(actual)
        for item in expected:
            found = next((a for a in remaining if _present(item, a, cwd)), _MISSING)
            if found is _MISSING:
                return False
            remaining.remove(found)
        return True
    if isinstance(expected, str) and isinstance(actual, str) and expected != actual:
        relative = cwd is not None and not os.path.isabs(expected) and os.path.isabs(actual)
        return relative and os.path.normpath(os.path.join(cwd or "", expected)) == os.path.normpath(actual)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


_MISSING = object()


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
