"""Shared fixtures: the scripted model server, a workspace, configs and a gateway driven like an IDE."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fakes.model_server import ModelServer

REPO = Path(__file__).resolve().parent.parent
FS_SERVER = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
FAKE_BACKEND = REPO / "tests/fakes/mcp_backend.py"
AGENTIFY = Path(sys.executable).with_name("agentify")
API_KEY = "sk-test-a1b2c3d4e5f6g7h8i9j0SECRET"
ENV_SECRET = "env-secret-value-4711-do-not-log"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "docs").mkdir(parents=True)
    (root / "notes.txt").write_text("remember the milk\n")
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / "docs" / "faq.md").write_text("# FAQ\n")
    return root


def fs_backend(root: Path, **extra: Any) -> dict[str, Any]:
    if not FS_SERVER.exists():
        pytest.fail(f"{FS_SERVER} is missing: run scripts/setup.sh (npm install) first")
    return {
        "id": "fs",
        "command": "node",
        "args": [str(FS_SERVER), str(root)],
        "description": "workspace files",
    } | extra


def fake_backend(backend_id: str = "fake", *flags: str, **extra: Any) -> dict[str, Any]:
    return {"id": backend_id, "command": sys.executable, "args": [str(FAKE_BACKEND), *flags]} | extra


def write_config(directory: Path, backends: list[dict[str, Any]], **top: Any) -> Path:
    path = directory / "agentify.json"
    path.write_text(json.dumps({"backends": backends, **top}))
    return path


def gateway_env(model: ModelServer | None, **extra: str) -> dict[str, str]:
    env = {"AGENTIFY_LOG_LEVEL": "DEBUG", "PYTHONPATH": str(REPO)}
    if model is not None:
        env |= {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": model.base_url}
    return env | extra


@asynccontextmanager
async def gateway(
    config: Path,
    env: dict[str, str],
    stderr: Path,
    *,
    init_options: dict[str, Any] | None = None,
    **client_options: Any,
) -> AsyncIterator[ClientSession]:
    """`agentify serve` as a subprocess, driven by the official MCP client, as an IDE does.

    `client_options` go to `ClientSession` (elicitation_callback, sampling_callback, ...): the
    session stays on the 2025-11-25 protocol, where the gateway can send those requests back."""
    # never the user's cache, nor the user's pins
    env = {"AGENTIFY_CACHE_DIR": str(stderr.parent / "cache"), "AGENTIFY_STATE_DIR": str(stderr.parent / "state")} | env
    params = StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config)], env=env)
    with stderr.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            if init_options is not None:
                write = _with_initialization_options(write, init_options)
            async with ClientSession(read, write, **client_options) as session:
                with anyio.fail_after(30):
                    await session.initialize()
                yield session


def _with_initialization_options(write: Any, options: dict[str, Any]) -> Any:
    """Adds `initializationOptions` to the outgoing `initialize`, as IDE clients on the TS SDK can."""

    class Injecting:
        async def send(self, message: Any) -> None:
            root = message.message
            if getattr(root, "method", None) == "initialize" and isinstance(root.params, dict):
                root.params["initializationOptions"] = options
            await write.send(message)

        async def __aenter__(self) -> Any:
            await write.__aenter__()
            return self

        async def __aexit__(self, *exc: Any) -> Any:
            return await write.__aexit__(*exc)

        def __getattr__(self, name: str) -> Any:
            return getattr(write, name)

    return Injecting()


async def echo_works(session: ClientSession, model: ModelServer) -> None:
    """Proves the gateway still serves: a planned call to the fake backend's echo tool."""
    from tests.fakes.model_server import Reply

    model.push(Reply.tool_call("fake__echo", {"text": "still here"}))
    result = await session.call_tool("orchestrate_task", {"query": "echo still here"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "echo: still here"


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def contents_text(result: Any) -> str:
    """The text of a `resources/read` result (its text contents, joined)."""
    return "".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))


def error_code(result: Any) -> str | None:
    meta = result.meta or {}
    return (meta.get("agentify/error") or {}).get("code")


async def wait_until(predicate: Any, seconds: float = 15.0) -> None:
    """Polls a condition of another process (no event exists across processes), bounded."""
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - the state lives in another process
            await anyio.sleep(0.05)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0): look at its state
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def group_alive(pgid: int) -> bool:
    """Whether any process of a process group is left (the tests' own check, independent of agentify._common.proc)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Any]:
    """A real redis-server (Debian's, installed by scripts/setup.sh) for this test; its `.url` and `.stop()`."""
    from tests.servers import RedisServer

    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: run scripts/setup.sh --tests")
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()
