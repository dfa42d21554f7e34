"""The docs site builds with `mkdocs build --strict` (a broken link or a missing page fails it), and
its reference pages are generated from the code, so they name every config key and every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentify.cli.parser import COMMANDS
from agentify.config.models import Config
from tests.conftest import REPO

pytestmark = pytest.mark.integration


def _keys(model: type[BaseModel]) -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        keys.add(field.alias or name)
        for inner in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                keys |= _keys(inner)
    return keys


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(target)],
        cwd=REPO,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def test_the_configuration_reference_names_every_key_of_the_models(site: Path) -> None:
    page = (site / "reference" / "configuration" / "index.html").read_text()
    missing = sorted(key for key in _keys(Config) if f"<code>{key}</code>" not in page)
    assert not missing, f"not in the generated reference: {missing}"
    assert "confirmation (and any question to the client) waits" in page  # a field's own description


def test_the_cli_reference_shows_every_command_with_its_flags(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text()
    for command in COMMANDS:
        assert f"agentify {command}" in page
    assert "--dry-run" in page and "--undo" in page


def test_every_page_of_the_navigation_is_built(site: Path) -> None:
    for page in ("install", "connect", "ide", "configuration", "security", "console", "planning", "arbigent"):
        assert (site / page / "index.html").is_file(), page


def test_the_readme_stays_short_and_links_into_the_site() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) < 20_000
    for page in ("docs/install.md", "docs/connect.md", "docs/configuration.md", "docs/development.md"):
        assert f"]({page})" in readme and (REPO / page).is_file(), page
