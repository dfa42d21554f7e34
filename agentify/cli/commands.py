"""The one-shot commands: `run`, `doctor`, `auth` and `eval`. Each opens the gateway's services,
does its job, prints its report on stdout and returns an exit code."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

import anyio

from agentify import __version__
from agentify._common.errors import first
from agentify.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from agentify.cli.output import note, say
from agentify.cli.running import one_shot, run_async
from agentify.config import Config
from agentify.errors import AgentifyError
from agentify.security.display import escaped
from agentify.security.redact import Redactor

if TYPE_CHECKING:
    from agentify.gateway.services import Boot


async def run_task(boot: Boot, args: argparse.Namespace) -> int:
    from agentify.cli.progress import TaskProgress
    from agentify.cli.terminal import for_terminal, terminal_confirmer, terminal_form
    from agentify.gateway.services import open_gateway
    from agentify.mcp_server.results import error_result, outcome_result, plan_result

    task = {"query": args.query, "context": {"currentWorkingDirectory": args.cwd}}
    redactor = boot.redactor
    # A status line on a terminal, unless a log writes to the same stream: then plain lines, as when piped.
    logged = args.log_level or os.environ.get("AGENTIFY_LOG_LEVEL")
    progress = TaskProgress(sys.stderr, live=sys.stderr.isatty() and not logged)
    confirmer = terminal_confirmer(args.yes, progress.paused)
    async with open_gateway(boot) as services:
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.ticking)
            try:
                outcome = await services.runner.run(
                    task,
                    execute=not args.dry_run,
                    confirmer=confirmer,
                    progress=progress.report,
                    asker=terminal_form(progress.paused, lambda text: redactor.bounded(text, 500)),
                )
                result = plan_result(outcome, redactor) if args.dry_run else outcome_result(outcome, redactor)
            except AgentifyError as exc:
                result = error_result(exc, redactor)
            finally:
                tg.cancel_scope.cancel()
                progress.clear()
        for status in services.status().backends:
            if status.state.value == "failed" and status.last_error:
                reason = _first_sentence(redactor.text(status.last_error))
                note(f"agentify run: backend {status.id} did not start: {reason}")
    if args.json:
        say(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2))
    else:
        meta = (result.meta or {}).get("agentify/plan")
        if meta:
            took = max(meta["durationMs"] - progress.waited * 1000, 0)  # not the time the user took to answer
            say(f"# {meta['backend']}.{meta['tool']} {json.dumps(meta['arguments'])} ({took:.0f} ms)")
        for block in result.content:
            say(for_terminal(_shown(block)) if result.is_error else _shown(block))
    return EXIT_FAILED if result.is_error else EXIT_OK


def _first_sentence(reason: str, limit: int = 110) -> str:
    """A backend's failure in one terminal line: what its stderr said, its first sentence, cut; doctor has it all."""
    said = reason.split("Its stderr says: ", 1)[-1]
    said = re.sub(r"^[\w. -]{1,40}: error: ", "", said)  # the backend's own name for itself
    said = said.split(". ", 1)[0].rstrip(".")
    cut = said if len(said) <= limit else said[: limit - 1] + "…"
    return f"{escaped(cut)} (`agentify doctor` shows why)"


def _shown(block: Any) -> str:
    """A content block as a terminal line: text as is, anything else named with what it points to."""
    if getattr(block, "text", None):
        return str(block.text)
    where = getattr(block, "uri", None) or getattr(getattr(block, "resource", None), "uri", None)
    size = f", {len(block.data) * 3 // 4} bytes" if isinstance(getattr(block, "data", None), str) else ""
    kind = getattr(block, "mime_type", None) or block.type
    return f"[{block.type}: {where}]" if where else f"[{block.type}: {kind}{size}]"


async def doctor(boot: Boot) -> int:
    from agentify.gateway.services import open_gateway

    say(f"agentify {__version__}")
    say(f"config: {boot.sources.file_path or '(no config file: defaults and environment only)'}")
    async with open_gateway(boot) as services:
        await services.backends.wait_all_settled()
        shown = services.status()
    choice, statuses = shown.planner, shown.backends
    say(f"planner: {choice.reason}")
    from agentify.planner import embedding

    say(f"tool search: {embedding.status()}")
    width = max([len(s.id) for s in statuses] + [7])
    say(f"\n{'BACKEND':<{width}}  {'STATE':<10}  {'TOOLS':>5}  DETAIL")
    broken = choice.name is None
    for status, spec in zip(statuses, boot.config.backends, strict=True):
        state = status.state.value if spec.enabled else "disabled"
        if spec.enabled and status.last_error:
            broken = True
        detail = status.last_error or ", ".join(status.tools)
        if status.url:
            detail = f"{status.url}: {detail}" if detail else status.url
        say(f"{status.id:<{width}}  {state:<10}  {len(status.tools):>5}  {escaped(boot.redactor.text(detail))}")
        if status.server:
            # The backend describes itself: shown escaped and cut, so it cannot fake lines of this report.
            say(f"{'':<{width}}  server: {escaped(boot.redactor.bounded(status.server, 300))}")
        for word, held in (("withheld", status.withheld), ("flagged", status.flagged)):
            for tool, why in held:  # what the backend wrote is shown escaped: it cannot fake lines of this report
                line = escaped(boot.redactor.bounded(f"{word} {tool}: {why}", 500))
                say(f"{'':<{width}}  {line} (agentify pins approve {status.id} {tool})")
        broken = broken or bool(status.withheld)
        if spec.enabled and status.last_error and spec.command and spec.problem is None:
            say(f"{'':<{width}}  relative paths resolve against: {spec.cwd}")
    if not statuses:
        say("(no backends configured: see backends.example.json)")
        broken = True
    say("\nresult: " + ("problems found (see above)" if broken else "all good"))
    return EXIT_FAILED if broken else EXIT_OK


def auth(config: Config, backend_id: str, redactor: Redactor) -> int:
    from agentify.backends.login import LoginFailed, login

    spec = next((b for b in config.backends if b.id == backend_id), None)
    if spec is None or not spec.oauth:
        oauth = [b.id for b in config.backends if b.oauth]
        note(
            f"agentify auth: {backend_id!r} is not a backend with auth.type oauth in the config "
            f"(OAuth backends: {', '.join(oauth) or 'none'})"
        )
        return EXIT_USAGE
    count = -1
    problem = ""

    async def authorize() -> int:
        nonlocal count, problem
        try:
            count = await login(spec, redactor.add, note)
        except Exception as exc:  # top level of the command: every failure becomes one readable line
            problem = _login_problem(exc, LoginFailed)
            return EXIT_FAILED
        return EXIT_OK

    code = run_async(authorize)
    if count >= 0:
        say(f"agentify auth: {backend_id} is authorized ({count} tools); running gateways pick it up on the next call")
    elif problem:
        note(f"agentify auth: {redactor.text(problem)}")
    return code


def _evaluate_public(args: argparse.Namespace) -> int:
    """`eval --mode public`: the public sets in process (recorded tools; no backend is started)."""
    from agentify.eval.public import evaluate_sets, load_many, report_lines
    from agentify.eval.routing import EvalFileError

    try:
        sets = load_many(args.file)
    except EvalFileError as exc:
        raise UsageError(str(exc)) from None
    if args.sample is not None and args.sample < 1:
        raise UsageError("--sample must be at least 1")
    reports: list[Any] = []

    async def measure() -> int:
        reports.extend(await evaluate_sets(sets, args.part, args.shortlist or 24, args.sample))
        return EXIT_OK

    code = one_shot("eval", measure)
    if code != EXIT_OK:
        return code
    say(json.dumps([r.as_json() for r in reports], indent=2) if args.json else "\n".join(report_lines(reports)))
    return EXIT_OK


def _login_problem(exc: BaseException, expected: type[Exception]) -> str:
    known = first(exc, expected)
    if known is not None:
        return str(known)
    leaf = first(exc, BaseException) or exc
    return f"the authorization failed: {type(leaf).__name__}: {leaf}. Check the url and try again."


def evaluate(boot: Boot, args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentify.eval.routing import EvalFileError, Report, evaluate_gateway, load_backends, load_cases
    from agentify.eval.search import SearchReport, evaluate_gateway_search
    from agentify.gateway.services import open_gateway

    if args.mode == "public":
        return _evaluate_public(args)
    try:
        cases = load_cases(Path(args.file), os.path.abspath(args.cwd or os.getcwd()))
        extra = [backend for path in args.extra_tools for backend in load_backends(Path(path))]
    except EvalFileError as exc:
        raise UsageError(str(exc)) from None
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    report: Report | SearchReport | None = None

    async def evaluate() -> int:
        nonlocal report
        try:
            async with open_gateway(boot) as services:
                if args.mode == "search":
                    report = await evaluate_gateway_search(services, cases, extra, args.limit)
                else:
                    report = await evaluate_gateway(services, cases, extra)
        except* EvalFileError as group:  # raised inside the gateway's task group, so wrapped
            raise UsageError(str(group.exceptions[0])) from None
        return EXIT_OK

    code = one_shot("eval", evaluate)
    if report is None:  # interrupted by a signal
        return code
    say(json.dumps(report.as_json(), indent=2) if args.json else "\n".join(report.lines()))
    return EXIT_OK
