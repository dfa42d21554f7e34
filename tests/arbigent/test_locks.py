"""The run lock lives in a private directory and is never a symlink (issue 13, item 7)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentify.arbigent.errors import ToolCallError
from agentify.arbigent.locks import LOCK_DIR_NAME, WorkdirLocks, lock_file_name, private_lock_dir

from .support import Workspace, connect

pytestmark = pytest.mark.anyio


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "run-user"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(directory))
    monkeypatch.setenv("AGENTIFY_CACHE_DIR", str(tmp_path / "cache"))
    return directory


async def nothing() -> None:
    pass


def test_the_lock_directory_is_created_private(runtime: Path) -> None:
    directory = private_lock_dir()
    assert directory == runtime / "agentify" / LOCK_DIR_NAME
    for path in (directory, directory.parent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_lock_directories_of_ours_that_are_too_open_are_closed(runtime: Path) -> None:
    (runtime / "agentify" / LOCK_DIR_NAME).mkdir(parents=True)
    os.chmod(runtime / "agentify", 0o777)
    os.chmod(runtime / "agentify" / LOCK_DIR_NAME, 0o755)
    private_lock_dir()
    assert stat.S_IMODE((runtime / "agentify").stat().st_mode) == 0o755, "nobody else may write to the parent"
    assert stat.S_IMODE((runtime / "agentify" / LOCK_DIR_NAME).stat().st_mode) == 0o700


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory to another user")
def test_a_directory_owned_by_another_user_is_not_used(runtime: Path, tmp_path: Path) -> None:
    (runtime / "agentify").mkdir(mode=0o700)
    os.chown(runtime / "agentify", 65534, 65534)
    assert private_lock_dir() == tmp_path / "cache" / LOCK_DIR_NAME


def test_a_symlink_instead_of_the_lock_directory_is_not_used(runtime: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runtime / "agentify").symlink_to(elsewhere)
    assert private_lock_dir() == tmp_path / "cache" / LOCK_DIR_NAME
    assert list(elsewhere.iterdir()) == []


async def test_a_symlink_planted_as_the_lock_file_is_not_followed(runtime: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lock_dir = private_lock_dir()
    target = tmp_path / "created-by-the-runner"
    (lock_dir / lock_file_name(work)).symlink_to(target)
    with pytest.raises(ToolCallError, match="it is a symbolic link"):
        async with WorkdirLocks().hold(work, nothing, time_limit=5):
            pass
    assert not target.exists()


def old_tmp_lock(directory: Path) -> Path:
    """Where the runner kept its lock before: /tmp, a predictable name, open to any local user."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"agentify-arbigent-{os.getuid()}-{digest}.lock"


@pytest.fixture
def foreign_lock(workspace: Workspace) -> Iterator[Path]:
    """Someone else holds a lock file at the old /tmp name of the workspace's directory."""
    path = old_tmp_lock(workspace.root.resolve())
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield path
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


@pytest.mark.integration
async def test_a_lock_held_by_someone_else_in_tmp_no_longer_blocks_runs(
    workspace: Workspace, foreign_lock: Path
) -> None:
    queued: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        queued.extend([message or ""] if "queued" in (message or "") else [])

    async with connect(workspace) as session:
        with anyio.fail_after(30):
            result = await session.call_tool("run-arbigent-test-login", {}, progress_callback=progress)
    assert not result.is_error
    assert queued == []


@pytest.mark.integration
async def test_a_symlink_planted_at_the_old_tmp_name_is_left_alone(workspace: Workspace, tmp_path: Path) -> None:
    planted = old_tmp_lock(workspace.root.resolve())
    target = tmp_path / "file-another-user-wanted-created"
    planted.unlink(missing_ok=True)
    planted.symlink_to(target)
    try:
        async with connect(workspace) as session:
            with anyio.fail_after(30):
                result = await session.call_tool("run-arbigent-test-login", {})
    finally:
        planted.unlink(missing_ok=True)
    assert not result.is_error
    assert not target.exists()
