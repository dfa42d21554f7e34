"""What a run produced: the CLI's stdout read line by line, and the report a tool call returns.

`StdoutObserver` follows the non-interactive output of `arbigent run` (`HH:MM:SS L: message`):
the execution plan, which selected scenario is running, the `Final Results` block and the result
paths (`arbigent run task` prints no plan and no `Final Results`: its result comes from result.yml).
`OutputCapture` keeps the head and tail of a stream so a huge output costs bounded memory and the
report states how much was cut.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from agentify.arbigent.artifacts import Attachment, ScenarioResult, StoredRun
from agentify.arbigent.devices import DeviceRefusal
from agentify.arbigent.schemas import RunOutput, ScenarioOutcome, Screenshot

_LINE = re.compile(r"^\d\d:\d\d:\d\d ([DIWE]): ?(.*)$")
_SELECTED = re.compile(r"\[Execution Plan\] Selected scenarios for execution: \[([^\]]*)\]\s*$")
_STARTED = re.compile(r"^⏺ (.+) scenario has been started$")
_FINAL_HEADER = "📋 Final Results:"
_FINAL_ITEM = re.compile(r"^(\S+) (.+): (\w+)$")
_YAML_RESULTS = re.compile(r"^•\s*YAML Results:\s*(.+)$")
_HTML_REPORT = re.compile(r"^•\s*HTML Report:\s*(.+)$")
_MODIFIED_SLACK_NS = 50_000_000
"""File timestamps come from a coarse kernel clock that can lag the start time we took by a tick."""


class OutputCapture:
    """Keeps the first and last `limit // 2` characters of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0

    def write(self, text: str) -> None:
        self.total += len(text)
        room = self._head_limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(text[:room])
            text = text[room:]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len - len(self._tail[0]) >= self._tail_limit:
            self._tail_len -= len(self._tail.popleft())

    def tail(self, chars: int) -> str:
        """The last `chars` characters seen (all of them when the stream was shorter)."""
        kept = "".join(self._tail)[-self._tail_limit :] if self._tail_limit else ""
        if not self.cut:
            kept = "".join(self._head) + kept
        return kept[-chars:]

    @property
    def cut(self) -> int:
        return max(0, self.total - self._head_limit - self._tail_limit)

    def render(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)[-self._tail_limit :] if self._tail_limit else ""
        if not self.cut:
            return head + tail
        return f"{head}\n[... {self.cut} characters cut from the middle of this output ...]\n{tail}"


class StdoutObserver:
    """Incremental reader of `arbigent run` stdout."""

    def __init__(self) -> None:
        self.selected: list[str] | None = None
        self.running: int | None = None
        """1-based index in `selected` of the scenario that started last."""
        self.final: list[ScenarioResult] = []
        self.result_file: str | None = None
        self.report_file: str | None = None
        self._in_final = False

    def feed(self, line: str) -> None:
        match = _LINE.match(line.rstrip())
        if match is None:
            self._in_final = False
            return
        message = match.group(2).strip()
        if self._in_final:
            item = _FINAL_ITEM.match(message)
            if item is not None:
                self.final.append(ScenarioResult(item.group(2), item.group(3) == "Success"))
                return
            self._in_final = False
        if message == _FINAL_HEADER:
            self._in_final = True
            self.final = []
        elif (selected := _SELECTED.search(message)) is not None:
            inner = selected.group(1).strip()
            self.selected = [s.strip() for s in inner.split(", ")] if inner else []
        elif (started := _STARTED.match(message)) is not None and self.selected and started.group(1) in self.selected:
            self.running = self.selected.index(started.group(1)) + 1
        elif (path := _YAML_RESULTS.match(message)) is not None:
            self.result_file = path.group(1).strip()
        elif (path := _HTML_REPORT.match(message)) is not None:
            self.report_file = path.group(1).strip()

    def position(self) -> str | None:
        """ "scenario k of n" once a selected scenario has started."""
        if self.selected and self.running is not None:
            return f"scenario {self.running} of {len(self.selected)}"
        return None


def fresh_file(path: Path, started_ns: int) -> Path | None:
    """`path` if it exists and was written by the run that started at `started_ns` (not a leftover)."""
    try:
        return path if path.stat().st_mtime_ns >= started_ns - _MODIFIED_SLACK_NS else None
    except OSError:
        return None


def merge_results(final: list[ScenarioResult], from_file: list[ScenarioResult]) -> list[ScenarioResult]:
    """The Final Results block wins; result.yml adds what stdout did not report (e.g. after a kill)."""
    seen = {r.id for r in final}
    return final + [r for r in from_file if r.id not in seen]


class RunStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    EMPTY = "empty"
    TIMEOUT = "timeout"


TAIL_CHARS = 4000
"""Characters of the end of stdout and of stderr in `structuredContent` (`stdoutTail`, `stderrTail`)."""
_JVM_NOISE = ("WARNING:", "OpenJDK", "Java HotSpot", "Picked up ", "SLF4J:", "Usage:")


@dataclass(frozen=True, kw_only=True)
class RunReport:
    selection: str
    """What was asked for, for people: "tag 'login'", "all scenarios", "scenario ids a, b", "the task '...'"."""
    is_task: bool = False
    status: RunStatus
    exit_code: int | None
    scenarios: tuple[ScenarioResult, ...]
    result_file: str | None
    report_file: str | None
    duration_ms: int
    command: str
    working_directory: str
    stdout: OutputCapture
    stderr: OutputCapture
    timeout_seconds: float
    run: StoredRun | None = None
    """The run's resources, once they are kept (`arbigent://runs/<run-id>/...`)."""
    attachments: tuple[Attachment, ...] = ()
    """The last screenshot of each failed scenario: attached as an image, or named with the reason."""
    device_refusal: DeviceRefusal | None = None
    """Set when the CLI stopped because it could not tell which device to use."""

    @property
    def is_error(self) -> bool:
        return self.status is not RunStatus.PASSED

    def structured(self) -> dict[str, Any]:
        """The `structuredContent` of the run, shaped by the tools' output schema (`schemas.RunOutput`)."""
        return RunOutput(
            status=self.status.value,
            exit_code=self.exit_code,
            scenarios=[ScenarioOutcome(id=r.id, success=r.success) for r in self.scenarios],
            result_file=self.result_file,
            report_file=self.report_file,
            duration_ms=self.duration_ms,
            run_id=self.run.run_id if self.run else None,
            screenshots=[
                Screenshot(scenario_id=a.scenario_id, uri=a.uri, attached=a.data is not None) for a in self.attachments
            ],
            stdout_tail=self.stdout.tail(TAIL_CHARS),
            stderr_tail=self.stderr.tail(TAIL_CHARS),
            devices=list(self.device_refusal.devices) if self.device_refusal else None,
        ).wire()

    def verdict(self) -> str:
        seconds = f"{self.duration_ms / 1000:.1f} s"
        failed = [r.id for r in self.scenarios if not r.success]
        if self.status is RunStatus.TIMEOUT:
            return (
                f"TIMED OUT: the arbigent run for {self.selection} was stopped after {self.timeout_seconds:g} s "
                "(raise the limit with the runner's --timeout SECONDS)."
            )
        if self.status is RunStatus.EMPTY:
            return f"FAILED: {self.selection} matched no scenario, so nothing ran (arbigent selected [])."
        if self.is_task and self.status is RunStatus.PASSED:
            return f"PASSED: the AI agent achieved {self.selection} ({seconds})."
        if self.is_task and failed:
            return f"FAILED: the AI agent did not achieve {self.selection} (exit code {self.exit_code}, {seconds})."
        if self.status is RunStatus.PASSED:
            ids = ", ".join(r.id for r in self.scenarios)
            done = f"{len(self.scenarios)} scenario(s) passed: {ids}" if ids else "arbigent exited 0"
            return f"PASSED: {done} ({self.selection}, {seconds})."
        if failed:
            return (
                f"FAILED: {len(failed)} of {len(self.scenarios)} scenario(s) failed: {', '.join(failed)} "
                f"({self.selection}, exit code {self.exit_code}, {seconds})."
            )
        if self.device_refusal is not None:
            return f"FAILED: nothing ran ({self.selection}): {self.device_refusal.verdict()}."
        reason = failure_reason(self.stderr.render(), self.stdout.render())
        because = f": {reason}" if reason else ""
        when = "although every reported scenario passed" if self.scenarios else "before reporting scenario results"
        return f"FAILED: arbigent exited with code {self.exit_code} {when} ({self.selection}){because}"

    def text(self) -> str:
        lines = [
            self.verdict(),
            f"Exit code: {self.exit_code if self.exit_code is not None else 'none (killed)'}",
            f"Command: {self.command}",
            f"Working directory: {self.working_directory}",
        ]
        if self.scenarios:
            lines.append("Scenarios:")
            lines += [f"  {'passed' if r.success else 'FAILED'}: {r.id}" for r in self.scenarios]
        lines.append(f"Result file: {self.result_file or 'not written'}")
        lines.append(f"HTML report: {self.report_file or 'not written'}")
        if self.run is not None:
            names = ", ".join(self.run.uri(name) for name in ("result.yml", "report.html") if name in self.run.files)
            shots = sum(1 for name in self.run.files if name.startswith("screenshots/"))
            lines.append(f"Resources of run {self.run.run_id}: {names or 'none'}; {shots} screenshot(s)")
        for a in self.attachments:
            if a.data is not None:
                lines.append(f"Screenshot of the last step of {a.scenario_id}: attached ({a.uri})")
            else:
                lines.append(f"Screenshot of the last step of {a.scenario_id}: not attached, {a.note}; read {a.uri}")
        for name, capture in (("stdout", self.stdout), ("stderr", self.stderr)):
            if capture.total:
                lines += [f"--- {name} ({capture.total} characters) ---", capture.render().rstrip("\n")]
        return "\n".join(lines)


def failure_reason(stderr: str, stdout: str) -> str | None:
    """The line that best explains a run that ended before any scenario result: a usage error, a JVM
    exception or another CLI error (printed with or without `Error:`, after any JVM warnings), or else
    the last `E:` line of stdout."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("Error:", "Exception in thread")):
            return line[:300]
    meaningful = [line for line in lines if not line.startswith(_JVM_NOISE) and not line.startswith("at ")]
    if meaningful:
        return meaningful[0][:300]
    errors = [m.group(2) for m in map(_LINE.match, stdout.splitlines()) if m is not None and m.group(1) == "E"]
    if errors:
        return errors[-1][:300]
    return lines[0][:300] if lines else None
