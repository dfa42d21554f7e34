"""Fixtures of the arbigent runner tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import CONFIG_YAML, PROJECT_YAML, Workspace


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "project"
    root.mkdir()
    project = root / "arbigent-project.yaml"
    project.write_text(PROJECT_YAML)
    config = tmp_path / "arbigent-config.yaml"
    config.write_text(CONFIG_YAML)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return Workspace(root, project, config, tmp_path / "record.jsonl", tmp_path / "runner-stderr.log", runtime)
