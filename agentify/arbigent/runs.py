"""One arbigent run from a tool call: command line, queueing, progress relay, and the report.

Transport-agnostic: progress goes to a plain async callback, so the MCP server is only an adapter.
A run is either a scenario selection (`arbigent run`) or an ad-hoc task (`arbigent run task`); both
get the same queueing, progress, cancel, timeout, result parsing and kept artifacts.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from loguru import logger

from agentify.arbigent.artifacts import (
    ArtifactStore,
    Attachment,
    ResultFile,
    StoredRun,
    attachments,
    read_result_file,
)
from agentify.arbigent.devices import DeviceChoiceError, device_flag, device_refusal
from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.locks import WorkdirLocks
from agentify.arbigent.options import NEWEST, CliOptions, Command
from agentify.arbigent.process import run_process
from agentify.arbigent.results import (
    OutputCapture,
    RunReport,
    RunStatus,
    StdoutObserver,
    fresh_file,
    merge_results,
)
from agentify.arbigent.settings import RunSettings, stray_settings
from agentify.security.redact import Redactor

Progress = Callable[[str], Awaitable[None]]

DEFAULT_TIMEOUT_SECONDS = 30 * 60.0
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_OUTPUT_LIMIT = 20_000
"""Characters of stdout (and of stderr) kept in a result: head and tail halves."""
JDK_CONSOLE = "-Djdk.console=java.base"
"""On JDK 22-24 `System.console()` is set even with piped stdio, and the CLI then draws its terminal UI
(no `Final Results`, no timestamped lines). This option, added to the child's JAVA_OPTS, keeps the lines."""
_PROGRESS_BUFFER = 256
"""Progress lines waiting for a slow client; beyond this they are dropped, never the child blocked."""
_RELAY_DRAIN_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class RunnerConfig:
    binary: Path
    project_file: Path
    working_directory: Path
    settings: RunSettings
    cli: CliOptions = NEWEST
    """The options of the CLI's version."""
    device_id: str | None = None
    """The runner's --device-id: the device of every run whose call names none."""
    lock_dir: Path | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    grace: float = DEFAULT_GRACE_SECONDS
    output_limit: int = DEFAULT_OUTPUT_LIMIT


@dataclass(frozen=True)
class Task:
    """An ad-hoc `arbigent run task GOAL`: no project file, one AI task on the device."""

    goal: str
    max_step: int | None = None
    max_retry: int | None = None

    def given(self) -> dict[str, int]:
        """The options this call sets; they replace the config's defaults for them."""
        values = {"max-step": self.max_step, "max-retry": self.max_retry}
        return {name: value for name, value in values.items() if value is not None}

    def args(self) -> list[str]:
        # `--` ends the options, so a goal starting with `-` or `@` is neither an option nor an argument file.
        return [f"--{name}={value}" for name, value in self.given().items()] + ["--", self.goal]


@dataclass(frozen=True)
class Selection:
    """What a run selects (everything, which is the CLI's leaves; one exact tag; scenario ids; or an
    ad-hoc task), and the device the call names."""

    tag: str | None = None
    ids: tuple[str, ...] = ()
    task: Task | None = None
    device_id: str | None = None

    def args(self) -> list[str]:
        if self.tag is not None:
            return [f"--tags={self.tag}"]
        if self.ids:
            return [f"--scenario-ids={','.join(self.ids)}"]
        return []

    def describe(self) -> str:
        if self.task is not None:
            goal = self.task.goal if len(self.task.goal) <= 120 else self.task.goal[:117] + "..."
            return f"the task {goal!r}"
        if self.tag is not None:
            return f"tag '{self.tag}'"
        if self.ids:
            return f"scenario ids {', '.join(self.ids)}"
        return "all scenarios"


class Runs:
    """Starts runs; two runs in one working directory queue instead of overlapping."""

    def __init__(
        self, config: RunnerConfig, redactor: Redactor, kill_now: anyio.Event, store: ArtifactStore | None = None
    ) -> None:
        self.config = config
        self.store = store or ArtifactStore()
        self._redactor = redactor
        self.kill_now = kill_now
        self._locks = WorkdirLocks(config.lock_dir)

    def argv(self, selection: Selection) -> list[str]:
        """The command line; typed options of `run task` all come after `task`, where the CLI reads them.

        Raises:
            DeviceChoiceError: the device asked for cannot be named to this CLI version.
        """
        return self._command_line(selection, shown=False)

    def display(self, selection: Selection) -> str:
        """The command line as it may be logged: values read from the config are replaced."""
        return shlex.join(self._command_line(selection, shown=True))

    def _command_line(self, selection: Selection, *, shown: bool) -> list[str]:
        command: Command = "task" if selection.task is not None else "run"
        settings = self.config.settings.for_command(command)
        device = self._device_flags(selection, command)
        without: set[str] = {self.config.cli.device_option} if device else set()
        if selection.task is not None:
            without |= selection.task.given().keys()
        flags = settings.display_argv(without=without) if shown else settings.argv(without=without)
        if selection.task is not None:
            return [str(self.config.binary), "run", "task", *flags, *device, *selection.task.args()]
        return [*self._head(selection), *flags, *device]

    def _device_flags(self, selection: Selection, command: Command) -> list[str]:
        device = selection.device_id or self.config.device_id
        if device is None:
            return []
        os_name = self.config.settings.for_command(command).value_of("os") or "android"
        return [device_flag(self.config.cli, os_name, device)]

    def env(self, selection: Selection) -> dict[str, str]:
        """The child's environment: the runner's, the config's API keys, and JAVA_OPTS keeping line output."""
        settings = self.config.settings.task if selection.task is not None else self.config.settings.run
        return child_env(os.environ, settings.env)

    def _head(self, selection: Selection) -> list[str]:
        return [str(self.config.binary), "run", f"--project-file={self.config.project_file}", *selection.args()]

    async def run(self, selection: Selection, progress: Progress) -> RunReport:
        """Runs the selection once the working directory is free.

        Raises:
            ToolCallError: the device asked for cannot be named to this CLI, a settings file in the
                working directory would change or fail the run, the directory stayed busy for longer
                than the timeout, or the CLI could not be started.
        """
        cwd = self.config.working_directory
        try:
            self.argv(selection)
        except DeviceChoiceError as exc:
            raise ToolCallError(str(exc)) from None
        problem = await anyio.to_thread.run_sync(stray_settings, cwd, self.config.cli)
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
        run_id = self.store.new_run_id()
        log = logger.bind(selection=selection.describe(), run=run_id)
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

        log.info("starting run {}: {} (in {})", run_id, command, config.working_directory)
        await progress(f"starting arbigent for {selection.describe()} (run {run_id})")
        started_ns = time.time_ns()
        started = anyio.current_time()
        spawn_error: OSError | ValueError | None = None
        relayed = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_relay, receive, progress, relayed)
            with send:
                try:
                    outcome = await run_process(
                        self.argv(selection),
                        cwd=config.working_directory,
                        env=self.env(selection),
                        stdout=stdout,
                        stderr=stderr,
                        on_stdout_line=on_stdout,
                        on_stderr_line=on_stderr,
                        time_limit=config.timeout,
                        grace=config.grace,
                        kill_now=self.kill_now,
                    )
                except (OSError, ValueError) as exc:
                    spawn_error = exc
            with anyio.move_on_after(_RELAY_DRAIN_SECONDS):
                await relayed.wait()
            tg.cancel_scope.cancel()
        if spawn_error is not None:
            why = getattr(spawn_error, "strerror", None) or spawn_error
            raise ToolCallError(f"could not start {config.binary}: {why}") from spawn_error
        if dropped:
            log.warning("{} progress lines were not relayed: the client read them too slowly", dropped)

        duration_ms = int((anyio.current_time() - started) * 1000)
        if outcome.timed_out:
            status = RunStatus.TIMEOUT
        elif outcome.exit_code != 0:
            status = RunStatus.FAILED
        elif observer.selected == []:
            status = RunStatus.EMPTY
        else:
            status = RunStatus.PASSED
        # result.yml holds every step of every scenario and can be large: read it off the event loop.
        kept = await anyio.to_thread.run_sync(self._keep, run_id, selection, status, observer, started_ns)
        run, result_file, report_file, from_file, shown = kept
        refusal = device_refusal(stderr.render()) if status is RunStatus.FAILED and not observer.final else None
        log.info("run {} finished: {} (exit code {}, {} ms)", run_id, status.value, outcome.exit_code, duration_ms)
        return RunReport(
            selection=selection.describe(),
            is_task=selection.task is not None,
            status=status,
            exit_code=outcome.exit_code,
            scenarios=tuple(merge_results(observer.final, from_file.scenarios)),
            result_file=str(result_file) if result_file else None,
            report_file=str(report_file) if report_file else None,
            duration_ms=duration_ms,
            command=command,
            working_directory=str(config.working_directory),
            stdout=stdout,
            stderr=stderr,
            timeout_seconds=config.timeout,
            run=run,
            attachments=tuple(shown),
            device_refusal=refusal,
        )

    def _keep(
        self, run_id: str, selection: Selection, status: RunStatus, observer: StdoutObserver, started_ns: int
    ) -> tuple[StoredRun, Path | None, Path | None, ResultFile, list[Attachment]]:
        """result.yml and report.html if this run wrote them, kept as the run's resources, and the
        screenshots to show for failed scenarios. Blocking."""
        result_file = self._fresh_artifact(observer.result_file, "result.yml", started_ns)
        report_file = self._fresh_artifact(observer.report_file, "report.html", started_ns)
        from_file = read_result_file(result_file) if result_file else ResultFile()
        label = f"{selection.describe()}, {status.value}"
        run = self.store.keep(run_id, label, result_file, report_file, from_file.screenshots)
        failed_ids = {r.id for r in merge_results(observer.final, from_file.scenarios) if not r.success}
        failed = [(sid, shot) for sid, shot in from_file.last_screenshot.items() if sid in failed_ids]
        shown = attachments(run, failed) if status is not RunStatus.PASSED else []
        return run, result_file, report_file, from_file, shown

    def _fresh_artifact(self, printed: str | None, name: str, started_ns: int) -> Path | None:
        """Where the CLI said it writes `name` (else its default place), if this run wrote it there.

        Only a file inside the working directory's `arbigent-result/` counts, even through symlinks.
        """
        directory = self.config.working_directory
        path = directory / printed if printed else directory / "arbigent-result" / name
        inside = os.path.realpath(directory / "arbigent-result") + os.sep
        if not os.path.realpath(path).startswith(inside):
            return None
        return fresh_file(path, started_ns)


def child_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`base` plus `extra`, with `-Djdk.console=java.base` appended to JAVA_OPTS (the user's value kept)."""
    env = {**base, **extra}
    current = env.get("JAVA_OPTS", "").strip()
    env["JAVA_OPTS"] = f"{current} {JDK_CONSOLE}" if current else JDK_CONSOLE
    return env


async def _relay(receive: MemoryObjectReceiveStream[str], progress: Progress, done: anyio.Event) -> None:
    try:
        async with receive:
            async for message in receive:
                await progress(message)
    finally:
        done.set()
