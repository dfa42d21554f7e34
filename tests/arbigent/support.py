"""Test support: a project like the facts doc's example, a config with a secret, and the runner as a subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import group_alive as group_alive  # the runner's tests import it from here

REPO = Path(__file__).resolve().parents[2]
FAKE_ARBIGENT = REPO / "tests" / "fakes" / "arbigent"
EXAMPLES = REPO / "examples" / "arbigent"
NEWEST = "0.81.1-20-g24b7c06"
"""The fake's default: a build from main after 0.81.1, with --device-id and sort (arbigent_fake/versions.py)."""
VERSIONS = ("0.77.0", NEWEST)
"""The behaviours the runner's tests run against: the oldest supported release and the newest."""

SECRET_KEY = "zebra-cactus-4242-do-not-log"
MODEL_FROM_CONFIG = "model-name-read-from-config-7f3a"

PROJECT_YAML = """\
scenarios:
- id: "launch-app"
  goal: "Launch the app and wait for the home screen."
  tags:
  - name: "smoke"
- id: "login"
  goal: "Log in with the test account."
  dependency: "launch-app"
  tags:
  - name: "login"
  - name: "smoke"
- id: "checkout"
  goal: "Buy the first product."
  dependency: "login"
  tags:
  - name: "purchase"
- id: "settings-dark-mode"
  goal: "Turn on dark mode."
  tags:
  - name: "settings"
"""

CONFIG_YAML = f"""\
ai-type: openai
openai-api-key: {SECRET_KEY}
openai-model-name: {MODEL_FROM_CONFIG}
tags: smoke
run:
  log-level: info
"""


@dataclass
class Workspace:
    """A project directory with a config, the fake's record file, the runner's stderr log, and a
    private runtime directory (`XDG_RUNTIME_DIR`) for the run locks."""

    root: Path
    project: Path
    config: Path
    record: Path
    errlog: Path
    runtime: Path
    binary: Path | None = FAKE_ARBIGENT
    """The runner's --arbigent-bin-path; None: none, so the runner looks for ./arbigentw, then on PATH."""

    def records(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def starts(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if "argv" in r]

    def stderr(self) -> str:
        return self.errlog.read_text() if self.errlog.exists() else ""

    def runner_args(self, *extra: str) -> list[str]:
        return [
            "-m",
            "agentify.arbigent",
            "--project",
            str(self.project),
            "--config",
            str(self.config),
            *(["--arbigent-bin-path", str(self.binary)] if self.binary else []),
            *extra,
        ]

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for the runner (and so for the fake it starts)."""
        return {
            "AGENTIFY_FAKE_PYTHON": sys.executable,
            "FAKE_ARBIGENT_RECORD": str(self.record),
            "AGENTIFY_ARBIGENT_GRACE_SECONDS": "3",
            "XDG_RUNTIME_DIR": str(self.runtime),
            **extra,
        }


def install_release(parent: Path, version: str) -> Path:
    """The fake as an unpacked release (or Homebrew's libexec) of `version`: `arbigent-<v>/bin/arbigent`
    beside `lib/arbigent-cli-<v>.jar`, which is where the runner reads the version. Returns bin/arbigent."""
    home = parent / f"arbigent-{version}"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "lib" / f"arbigent-cli-{version}.jar").write_bytes(b"")
    script = home / "bin" / "arbigent"
    script.write_text(
        f"#!/bin/sh\n# The start script of an arbigent {version} release, played by the fake.\n"
        f"FAKE_ARBIGENT_VERSION={version}; export FAKE_ARBIGENT_VERSION\nexec '{FAKE_ARBIGENT}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


@asynccontextmanager
async def connect(
    workspace: Workspace,
    *extra_args: str,
    env: dict[str, str] | None = None,
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[ClientSession]:
    """The runner as a subprocess (`python -m agentify.arbigent`), driven by the official MCP client."""
    params = StdioServerParameters(
        command=sys.executable, args=workspace.runner_args(*extra_args), env=workspace.env(**(env or {}))
    )
    with workspace.errlog.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=message_handler) as session:
                with anyio.fail_after(30):
                    await session.initialize()
                yield session


async def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    """Polls `condition` until it holds; fails the test after `seconds`."""
    with anyio.fail_after(seconds):
        while True:
            if condition():
                return
            await anyio.sleep(0.05)
