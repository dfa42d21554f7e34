"""Fixtures of the arbigent runner tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import CONFIG_YAML, FAKE_ARBIGENT, PROJECT_YAML, Workspace, install_release


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cli_version(request: pytest.FixtureRequest) -> str | None:
    """The arbigent version the workspace's CLI is, when a module parametrizes it (`indirect=True`);
    else None: the fake itself, whose version the runner cannot read, so it uses the newest options."""
    return getattr(request, "param", None)


@pytest.fixture
def workspace(tmp_path: Path, cli_version: str | None) -> Workspace:
    root = tmp_path / "project"
    root.mkdir()
    project = root / "arbigent-project.yaml"
    project.write_text(PROJECT_YAML)
    config = tmp_path / "arbigent-config.yaml"
    config.write_text(CONFIG_YAML)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    binary = install_release(tmp_path / "install", cli_version) if cli_version else FAKE_ARBIGENT
    return Workspace(root, project, config, tmp_path / "record.jsonl", tmp_path / "runner-stderr.log", runtime, binary)
