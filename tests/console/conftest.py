"""Console fixtures: a real `agentify serve --debug-port N` driven by the official MCP client,
and real HTTP and WebSocket clients for its console."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, async_playwright, expect
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import AGENTIFY, REPO, wait_until
from tests.fakes.model_server import ModelServer, Reply

TOKEN = "console-test-token-0123456789abcdef"
URL_LINE = re.compile(r"debug console: (http://\S+)/\?token=(\S+)")
ARTIFACTS = REPO / "test-artifacts"  # the browser tests' screenshots (ignored by git)
# Running as root in a container: no sandbox, no GPU, and nothing that phones home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so a module can share one gateway between its tests."""
    return "asyncio"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def make_workspace(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "notes.txt").write_text("remember the milk\n")
    (root / "docs" / "guide.md").write_text("# Guide\n")
    return root


def route_tasks(body: dict[str, Any]) -> Reply:
    """A model that reads the file named by "read X" and echoes the text of "echo X"."""
    names = [tool["function"]["name"] for tool in body.get("tools", [])]
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    task = user.split("Task: ")[1].split("\n")[0]
    cwd = user.split("current working directory: ")[1].split("\n")[0] if "current working directory: " in user else ""
    if task.startswith("read ") and "fs__read_text_file" in names:
        return Reply.tool_call("fs__read_text_file", {"path": f"{cwd}/{task.removeprefix('read ')}"})
    if task.startswith("echo ") and "fake__echo" in names:
        return Reply.tool_call("fake__echo", {"text": task.removeprefix("echo ")})
    return Reply.text("None of the tools can do that.")


@pytest.fixture(scope="module")
def scripted_model() -> Iterator[ModelServer]:
    server = ModelServer().start()
    server.router = route_tasks
    yield server
    server.stop()


@dataclass
class Console:
    session: ClientSession | None  # None when the test drives the gateway itself
    url: str  # http://127.0.0.1:PORT, no trailing slash
    port: int
    token: str
    stderr: Path
    workspace: Path | None = None  # set by fixtures whose tasks refer to one
    process: anyio.abc.Process | None = None  # the gateway, when the test started it itself

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def http(self, **options: Any) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(base_url=self.url, timeout=30, **options)

    async def get(self, path: str, **options: Any) -> Any:
        """GET with the bearer token; asserts 200 and returns the JSON."""
        async with self.http() as client:
            response = await client.get(path, headers=self.auth, **options)
        assert response.status_code == 200, response.text
        return response.json()

    async def wait_for_state(self, backend: str, state: str, seconds: float = 30) -> dict[str, Any]:
        """Polls /api/backends (the state lives in the gateway's process) until `backend` is in `state`."""
        with anyio.fail_after(seconds):
            while True:
                found = next(b for b in await self.get("/api/backends") if b["id"] == backend)
                if found["state"] == state:
                    return found
                await anyio.sleep(0.1)

    async def open_confirmation(self, seconds: float = 15) -> dict[str, Any]:
        """Polls /api/confirmations (the question lives in the gateway's process) until one is open."""
        with anyio.fail_after(seconds):
            while True:
                if pending := await self.get("/api/confirmations"):
                    first: dict[str, Any] = pending[0]
                    return first
                await anyio.sleep(0.05)

    async def post_task(self, task: Any) -> dict[str, Any]:
        async with self.http() as client:
            response = await client.post("/api/tasks", json=task, headers=self.auth)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    @asynccontextmanager
    async def websocket(self, **options: Any) -> AsyncIterator[ClientConnection]:
        async with connect(f"ws://127.0.0.1:{self.port}/ws", additional_headers=self.auth, **options) as ws:
            yield ws


def own_folders(stderr: Path) -> dict[str, str]:
    """The gateway's cache and state folders beside its log: never the user's manifests or pins."""
    return {"AGENTIFY_CACHE_DIR": str(stderr.parent / "cache"), "AGENTIFY_STATE_DIR": str(stderr.parent / "state")}


def console_url(stderr: Path) -> tuple[str, str] | None:
    """The base URL and token from the line the gateway writes at start, if it is there yet."""
    match = URL_LINE.search(stderr.read_text()) if stderr.exists() else None
    return (match.group(1), match.group(2)) if match else None


@asynccontextmanager
async def console_gateway(
    config: Path, env: dict[str, str], stderr: Path, *, port: int | None = None, args: Sequence[str] = ()
) -> AsyncIterator[Console]:
    """`agentify serve --debug-port N` as a subprocess, driven like tests/conftest.py's `gateway()`;
    yields once the console has announced its URL."""
    flags = ["--debug-port", str(port or free_port()), *args]
    env = own_folders(stderr) | env
    params = StdioServerParameters(command=str(AGENTIFY), args=["serve", "--config", str(config), *flags], env=env)
    with stderr.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(30):
                await session.initialize()
            await wait_until(lambda: console_url(stderr) is not None)
            url, token = console_url(stderr) or ("", "")
            yield Console(session, url, int(url.rsplit(":", 1)[1]), token, stderr)


@asynccontextmanager
async def silent_gateway(
    config: Path, env: dict[str, str], stderr: Path, *, port: int | None = None, stdout: int = subprocess.PIPE
) -> AsyncIterator[Console]:
    """`agentify serve --debug-port N` as a terminal user starts it: stdin open, no MCP client ever speaks.
    Yields once the console has announced its URL; leaving ends stdin (the gateway then stops by itself)."""
    env = own_folders(stderr) | env
    command = [str(AGENTIFY), "serve", "--config", str(config), "--debug-port", str(port or free_port())]
    with stderr.open("a") as errlog:
        process = await anyio.open_process(command, stdin=subprocess.PIPE, stdout=stdout, stderr=errlog, env=env)
        try:
            # A cold start on a loaded machine (other test runs beside this one) can take many seconds.
            await wait_until(lambda: console_url(stderr) is not None or process.returncode is not None, 60)
            found = console_url(stderr)
            assert found is not None, f"agentify serve stopped with code {process.returncode}; see {stderr}"
            url, token = found
            yield Console(None, url, int(url.rsplit(":", 1)[1]), token, stderr, process=process)
        finally:
            assert process.stdin is not None
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
            with anyio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Debian's chromium (scripts/setup.sh --browser), headless, driven by Playwright."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh --browser (it installs Debian's chromium)")
    expect.set_options(timeout=WAIT_MS)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


async def open_page(
    opener: Browser | BrowserContext, problems: list[str], width: int = 1440, height: int = 900
) -> Page:
    page = await opener.new_page()
    await page.set_viewport_size({"width": width, "height": height})
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":  # CSP violations and failed requests land here too
            problems.append(f"console: {message.text}")

    page.on("console", on_console)
    return page


def artifact(name: str) -> str:
    """Where a test saves a screenshot: test-artifacts/ of the checkout."""
    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / name)
