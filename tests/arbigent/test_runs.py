"""Runs driven in process against the fake CLI: the cases a real project cannot easily provoke."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentify.arbigent.artifacts import ArtifactStore
from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.locks import WorkdirLocks
from agentify.arbigent.results import RunStatus
from agentify.arbigent.runs import RunnerConfig, Runs, Selection, Task
from agentify.arbigent.settings import RunSettings
from agentify.security.redact import Redactor

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
    return Runs(config, Redactor(), anyio.Event(), ArtifactStore(parent=workspace.root.parent))


def private_locks(tmp_path: Path) -> WorkdirLocks:
    directory = tmp_path / "locks"
    directory.mkdir(mode=0o700, exist_ok=True)
    return WorkdirLocks(directory)


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
    first, second = private_locks(tmp_path), private_locks(tmp_path)
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
    locks = private_locks(tmp_path)
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


async def test_java_opts_keeps_the_users_value_and_adds_the_line_console(
    workspace: Workspace, fake_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On JDK 22-24 the CLI would draw its terminal UI and print no results without -Djdk.console=java.base."""
    monkeypatch.setenv("JAVA_OPTS", "-Xmx2g")
    monkeypatch.setenv("FAKE_ARBIGENT_JDK", "23")
    report = await runs_for(workspace).run(Selection(tag="login"), no_progress)
    assert workspace.starts()[0]["java_opts"] == "-Xmx2g -Djdk.console=java.base"
    assert report.status is RunStatus.PASSED
    assert [(r.id, r.success) for r in report.scenarios] == [("login", True)]


async def test_an_ad_hoc_task_runs_arbigent_run_task_with_the_goal_after_the_options(
    workspace: Workspace, fake_env: None
) -> None:
    task = Task("-x check that @home shows a greeting", max_step=4)
    report = await runs_for(workspace).run(Selection(task=task), no_progress)
    [start] = workspace.starts()
    assert start["argv"] == ["run", "task", "--max-step=4", "--", "-x check that @home shows a greeting"]
    assert report.status is RunStatus.PASSED
    assert report.verdict().startswith("PASSED: the AI agent achieved the task '-x check that @home shows a greeting'")
    assert [(r.id, r.success) for r in report.scenarios] == [("task", True)]
    assert report.attachments == ()


async def test_a_failed_task_shows_its_last_screenshot_and_keeps_its_files(
    workspace: Workspace, fake_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ARBIGENT_FAIL", "task")
    runs = runs_for(workspace)
    try:
        report = await runs.run(Selection(task=Task("turn on dark mode", max_retry=1)), no_progress)
        assert report.status is RunStatus.FAILED and report.run is not None
        [shot] = report.attachments
        assert shot.scenario_id == "task" and shot.data is not None and shot.data.startswith(b"\x89PNG")
        assert shot.uri.startswith(f"arbigent://runs/{report.run.run_id}/screenshots/")
        assert set(report.run.files) >= {"result.yml", "report.html", shot.uri.split("/", 4)[-1]}
        assert len([n for n in report.run.files if n.startswith("screenshots/")]) == 4  # 2 attempts x 2 steps
        data, mime = runs.store.read(report.run.uri("result.yml"))
        assert mime == "application/yaml" and b"turn on dark mode" in data
    finally:
        runs.store.close()


async def test_a_scenario_without_an_id_runs_in_all_and_by_its_tag(workspace: Workspace, fake_env: None) -> None:
    workspace.project.write_text('scenarios:\n- goal: "Open the app."\n  tags:\n  - name: "smoke"\n')
    report = await runs_for(workspace).run(Selection(tag="smoke"), no_progress)
    assert report.status is RunStatus.PASSED
    [result] = report.scenarios
    assert len(result.id) == 36 and result.success, "the CLI gives it a random UUID"
