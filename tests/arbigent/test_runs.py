"""Runs driven in process against the fake CLI: the cases a real project cannot easily provoke."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.process import WorkdirLocks
from agentify.arbigent.results import RunStatus
from agentify.arbigent.runs import RunnerConfig, Runs, Selection
from agentify.arbigent.settings import RunSettings
from agentify.redact import Redactor

from .support import FAKE_ARBIGENT, Workspace, group_alive

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def fake_env(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in workspace.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield


def runs_for(workspace: Workspace, *, timeout: float = 60, grace: float = 3, binary: Path = FAKE_ARBIGENT) -> Runs:
    config = RunnerConfig(
        binary=binary,
        project_file=workspace.project,
        working_directory=workspace.root,
        settings=RunSettings(),
        timeout=timeout,
        grace=grace,
    )
    return Runs(config, Redactor(), anyio.Event())


async def no_progress(message: str) -> None:
    pass


async def test_a_tag_that_matches_nothing_is_an_error_saying_so(workspace: Workspace, fake_env: None) -> None:
    report = await runs_for(workspace).run(Selection(tag="nope"), no_progress)
    assert report.exit_code == 0
    assert report.status is RunStatus.EMPTY
    assert report.is_error
    assert report.verdict().startswith("FAILED: tag 'nope' matched no scenario")


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(
    workspace: Workspace, fake_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ARBIGENT_HANG", "1")
    monkeypatch.setenv("FAKE_ARBIGENT_IGNORE_SIGTERM", "1")
    with anyio.fail_after(30):
        report = await runs_for(workspace, timeout=1, grace=0.5).run(Selection(tag="login"), no_progress)
    assert report.status is RunStatus.TIMEOUT
    assert report.exit_code == -9
    assert not group_alive(workspace.starts()[0]["pgid"])


async def test_a_settings_file_appearing_in_the_working_directory_refuses_the_run(
    workspace: Workspace, fake_env: None
) -> None:
    runs = runs_for(workspace)
    (workspace.root / ".arbigent").mkdir()
    (workspace.root / ".arbigent" / "settings.yml").write_text("tags: smoke\n")
    with pytest.raises(ToolCallError, match="settings.yml sets tags"):
        await runs.run(Selection(), no_progress)


async def test_an_executable_that_cannot_start_is_a_tool_error(workspace: Workspace, fake_env: None) -> None:
    broken = workspace.root / "arbigent"
    broken.write_text("not a script")
    broken.chmod(0o755)
    with pytest.raises(ToolCallError, match="could not start"):
        await runs_for(workspace, binary=broken).run(Selection(), no_progress)


async def test_runners_in_other_processes_also_queue_on_the_same_directory(tmp_path: Path) -> None:
    """Two lock tables stand in for two runner processes: they share only the file lock."""
    first, second = WorkdirLocks(), WorkdirLocks()
    queued = anyio.Event()
    order: list[str] = []

    async def on_queued() -> None:
        queued.set()

    async def nothing() -> None:
        pass

    async def second_run() -> None:
        async with second.hold(tmp_path, on_queued, time_limit=10):
            order.append("second")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            async with first.hold(tmp_path, nothing, time_limit=10):
                tg.start_soon(second_run)
                await queued.wait()
                order.append("first")
    assert order == ["first", "second"]


async def test_a_directory_busy_for_longer_than_the_limit_is_a_tool_error(tmp_path: Path) -> None:
    locks = WorkdirLocks()
    errors: list[ToolCallError] = []

    async def nothing() -> None:
        pass

    async def impatient_run() -> None:
        try:
            async with locks.hold(tmp_path, nothing, time_limit=0.2):
                pass
        except ToolCallError as exc:
            errors.append(exc)

    with anyio.fail_after(10):
        async with locks.hold(tmp_path, nothing, time_limit=10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(impatient_run)
    assert "busy for more than 0.2 s" in str(errors[0])
