"""`check-arbigent-project`: `arbigent sort --diff`, which says whether the project file is in
dependency order, without changing it.

Only `--diff` is ever passed: plain `sort` rewrites the project file in place, and the runner never
writes the user's project. `sort --diff` exits 0 ("Already sorted: <file>") or 1 after printing the
unified diff and "... Run `arbigent sort` to apply."; any other outcome (a project the CLI refuses,
a usage error) is a failed check whose reason is the CLI's own line.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

import anyio

from agentify.arbigent.process import run_process
from agentify.arbigent.results import OutputCapture, failure_reason
from agentify.arbigent.runs import RunnerConfig, child_env
from agentify.arbigent.schemas import LintOutput

LINT_TIMEOUT_SECONDS = 120.0
_APPLY_HINT = "Run `arbigent sort` to apply."


@dataclass(frozen=True)
class LintReport:
    sorted: bool | None
    """None when the check itself failed."""
    output: str
    """What `sort --diff` printed on stdout: the diff and its summary, or "Already sorted"."""
    exit_code: int | None
    command: str
    reason: str | None = None

    @property
    def is_error(self) -> bool:
        return self.sorted is None

    def text(self) -> str:
        if self.sorted:
            return f"The project file is already sorted (`{self.command}` exited 0)."
        if self.sorted is False:
            return (
                "The project file is not in dependency order; `arbigent sort` would apply this diff (the file was "
                f"not changed):\n{self.output.rstrip()}"
            )
        return f"The project lint failed: `{self.command}` exited with code {self.exit_code}: {self.reason}"

    def structured(self) -> dict[str, object]:
        diff = self.output if self.sorted is False else ""
        return LintOutput(sorted=bool(self.sorted), diff=diff, exit_code=self.exit_code or 0).wire()


async def lint_project(config: RunnerConfig, kill_now: anyio.Event) -> LintReport:
    """Runs `arbigent sort --diff` on the project file, in the working directory.

    Raises:
        OSError: the executable could not be started.
    """
    argv = [str(config.binary), "sort", f"--project-file={config.project_file}", "--diff"]
    stdout, stderr = OutputCapture(config.output_limit), OutputCapture(config.output_limit)
    outcome = await run_process(
        argv,
        cwd=config.working_directory,
        env=child_env(os.environ, {}),
        stdout=stdout,
        stderr=stderr,
        on_stdout_line=_ignore,
        on_stderr_line=_ignore,
        time_limit=min(config.timeout, LINT_TIMEOUT_SECONDS),
        grace=config.grace,
        kill_now=kill_now,
    )
    command = shlex.join(argv)
    out = stdout.render()
    if outcome.exit_code == 0 and "Already sorted" in out:
        return LintReport(True, out, 0, command)
    if outcome.exit_code == 1 and _APPLY_HINT in out:
        return LintReport(False, out, 1, command)
    if outcome.timed_out:
        reason = f"it did not finish within {min(config.timeout, LINT_TIMEOUT_SECONDS):g} s"
    else:
        reason = failure_reason(stderr.render(), out) or "it printed nothing that says why"
    return LintReport(None, out, outcome.exit_code, command, reason)


def _ignore(line: str) -> None:
    pass
