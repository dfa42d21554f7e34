"""The Playwright MCP backend with Debian's chromium, through the gateway."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PLAYWRIGHT_MCP = REPO / "node_modules/@playwright/mcp/cli.js"


def browser_backend(output_dir: Path) -> dict[str, Any]:
    chromium = shutil.which("chromium")
    if chromium is None or not PLAYWRIGHT_MCP.exists():
        pytest.fail("chromium or @playwright/mcp is missing: run scripts/setup.sh --browser")
    args = [str(PLAYWRIGHT_MCP), "--headless", "--browser", "chromium", "--executable-path", chromium]
    return {
        "id": "browser",
        "command": "node",
        "args": [*args, "--isolated", "--output-dir", str(output_dir)],
        "description": "A headless browser",
        "startupTimeoutSeconds": 60,
        "allowDestructive": True,  # Playwright marks navigate and click destructive; the profile is throw-away
    }


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "login.html").write_text(
        "<!doctype html><title>Login</title><h1>Sign in to Acme</h1>"
        "<form><input name='user' placeholder='User name'><button>Log in</button></form>"
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_open_a_page_and_snapshot_shows_its_heading(tmp_path: Path, model: ModelServer, site: str) -> None:
    url = f"{site}/login.html"
    config = write_config(tmp_path, [browser_backend(tmp_path / "browser-output")])
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        model.push(Reply.tool_call("browser__browser_navigate", {"url": url}))
        opened = await session.call_tool("orchestrate_task", {"query": f"open {url}"})
        model.push(Reply.tool_call("browser__browser_snapshot", {}))
        snapshot = await session.call_tool("orchestrate_task", {"query": "show me the page"})
    assert not opened.is_error, text_of(opened)
    assert f"Page URL: {url}" in text_of(opened) and "Page Title: Login" in text_of(opened)
    assert not snapshot.is_error, text_of(snapshot)
    assert 'heading "Sign in to Acme"' in text_of(snapshot)
    assert "textbox" in text_of(snapshot) and 'button "Log in"' in text_of(snapshot)
