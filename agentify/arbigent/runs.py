"""One arbigent run from a tool call: command line, queueing, progress relay, and the report.

Transport-agnostic: progress goes to a plain async callback, so the MCP server is only an adapter.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from loguru import logger

from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.process import WorkdirLocks, run_process
from agentify.arbigent.results import (
    OutputCapture,
    RunReport,
    RunStatus,
    ScenarioResult,
    StdoutObserver,
    fresh_file,
    merge_results,
    read_result_yml,
)
from agentify.arbigent.settings import RunSettings, stray_settings
from agentify.redact import Redactor

Progress = Callable[[str], Awaitable[None]]

DEFAULT_TIMEOUT_SECONDS = 30 * 60.0
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_OUTPUT_LIMIT = 20_000
"""Characters of stdout (and of stderr) kept in a result: head and tail halves."""
_PROGRESS_BUFFER = 256
"""Progress lines waiting for a slow client; beyond this they are dropped, never the child blocked."""
_RELAY_DRAIN_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class RunnerConfig:
    binary: Path
    project_file: Path
    working_directory: Path
    settings: RunSettings
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    grace: float = DEFAULT_GRACE_SECONDS
    output_limit: int = DEFAULT_OUTPUT_LIMIT


@dataclass(frozen=True)
class Selection:
    """What a run selects: everything (the CLI's leaves), one exact tag, or scenario ids."""

    tag: str | None = None
    ids: tuple[str, ...] = ()

    def args(self) -> list[str]:
        if self.tag is not None:
            return [f"--tags={self.tag}"]
        if self.ids:
            return [f"--scenario-ids={','.join(self.ids)}"]
        return []

    def describe(self) -> str:
        if self.tag is not None:
            return f"tag '{self.tag}'"
        if self.ids:
            return f"scenario ids {', '.join(self.ids)}"
        return "all scenarios"


class Runs:
    """Starts runs; two runs in one working directory queue instead of overlapping."""

    def __init__(self, config: RunnerConfig, redactor: Redactor, kill_now: anyio.Event) -> None:
        self.config = config
        self._redactor = redactor
        self._kill_now = kill_now
        self._locks = WorkdirLocks()

    def argv(self, selection: Selection) -> list[str]:
        return [*self._head(selection), *self.config.settings.argv()]

    def display(self, selection: Selection) -> str:
        """The command line as it may be logged: values read from the config are replaced."""
        return shlex.join([*self._head(selection), *self.config.settings.display_argv()])

    def _head(self, selection: Selection) -> list[str]:
        return [str(self.config.binary), "run", f"--project-file={self.config.project_file}", *selection.args()]

    async def run(self, selection: Selection, progress: Progress) -> RunReport:
        """Runs the selection once the working directory is free.

        Raises:
            ToolCallError: a settings file in the working directory would change the run, the
                directory stayed busy for longer than the timeout, or the CLI could not be started.
        """
        cwd = self.config.working_directory
        problem = stray_settings(cwd)
        if problem is not None:
            raise ToolCallError(f"refusing to run: {problem}")

        async def queued() -> None:
            logger.info("run for {} is queued behind another run in {}", selection.describe(), cwd)
            await progress(f"queued: another arbigent run is using {cwd}; this run starts when it ends")

        async with self._locks.hold(cwd, queued, time_limit=self.config.timeout):
            return await self._execute(selection, progress)

    async def _execute(self, selection: Selection, progress: Progress) -> RunReport:
        config = self.config
        command = self.display(selection)
        log = logger.bind(selection=selection.describe())
        observer = StdoutObserver()
        stdout, stderr = OutputCapture(config.output_limit), OutputCapture(config.output_limit)
        send, receive = anyio.create_memory_object_stream[str](_PROGRESS_BUFFER)
        dropped = 0

        def on_stdout(line: str) -> None:
            nonlocal dropped
            observer.feed(line)
            clean = self._redactor.text(line, patterns=False)
            log.info("arbigent: {}", clean)
            position = observer.position()
            try:
                send.send_nowait(f"{position}: {clean}" if position else clean)
            except anyio.WouldBlock:
                dropped += 1

        def on_stderr(line: str) -> None:
            log.warning("arbigent stderr: {}", line)

        log.info("starting {} (in {})", command, config.working_directory)
        await progress(f"starting arbigent for {selection.describe()}")
        started_ns = time.time_ns()
        started = anyio.current_time()
        spawn_error: OSError | None = None
        relayed = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_relay, receive, progress, relayed)
            with send:
                try:
                    outcome = await run_process(
                        self.argv(selection),
                        cwd=config.working_directory,
                        env={**os.environ, **(config.settings.env or {})},
                        stdout=stdout,
                        stderr=stderr,
                        on_stdout_line=on_stdout,
                        on_stderr_line=on_stderr,
                        time_limit=config.timeout,
                        grace=config.grace,
                        kill_now=self._kill_now,
                    )
                except OSError as exc:
                    spawn_error = exc
            with anyio.move_on_after(_RELAY_DRAIN_SECONDS):
                await relayed.wait()
            tg.cancel_scope.cancel()
        if spawn_error is not None:
            raise ToolCallError(
                f"could not start {config.binary}: {spawn_error.strerror or spawn_error}"
            ) from spawn_error
        if dropped:
            log.warning("{} progress lines were not relayed: the client read them too slowly", dropped)

        duration_ms = int((anyio.current_time() - started) * 1000)
        # result.yml holds every step of every scenario and can be large: parse it off the event loop.
        result_file, report_file, from_file = await anyio.to_thread.run_sync(self._artifacts, observer, started_ns)
        scenarios = merge_results(observer.final, from_file)
        if outcome.timed_out:
            status = RunStatus.TIMEOUT
        elif outcome.exit_code != 0:
            status = RunStatus.FAILED
        elif observer.selected == []:
            status = RunStatus.EMPTY
        else:
            status = RunStatus.PASSED
        log.info("run finished: {} (exit code {}, {} ms)", status.value, outcome.exit_code, duration_ms)
        return RunReport(
            selection=selection.describe(),
            status=status,
            exit_code=outcome.exit_code,
            scenarios=tuple(scenarios),
            result_file=str(result_file) if result_file else None,
            report_file=str(report_file) if report_file else None,
            duration_ms=duration_ms,
            command=command,
            working_directory=str(config.working_directory),
            stdout=stdout,
            stderr=stderr,
            timeout_seconds=config.timeout,
        )

    def _artifacts(
        self, observer: StdoutObserver, started_ns: int
    ) -> tuple[Path | None, Path | None, list[ScenarioResult]]:
        """result.yml and report.html if this run wrote them, and the per-scenario results in result.yml."""
        result_file = fresh_file(self._artifact(observer.result_file, "result.yml"), started_ns)
        report_file = fresh_file(self._artifact(observer.report_file, "report.html"), started_ns)
        return result_file, report_file, read_result_yml(result_file) if result_file else []

    def _artifact(self, printed: str | None, name: str) -> Path:
        """Where the CLI said it writes `name`, else where it writes it by default."""
        if printed:
            return self.config.working_directory / printed
        return self.config.working_directory / "arbigent-result" / name


async def _relay(receive: MemoryObjectReceiveStream[str], progress: Progress, done: anyio.Event) -> None:
    try:
        async with receive:
            async for message in receive:
                await progress(message)
    finally:
        done.set()
