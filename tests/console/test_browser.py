"""The console page in real headless Chromium (Debian's chromium package, driven by Playwright)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.conftest import REPO, fs_backend, gateway_env, write_config
from tests.console.conftest import TOKEN, console_gateway, free_port, make_workspace, open_page
from tests.fakes.model_server import ModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

# Always the test artifact; the README copy only with AGENTIFY_UPDATE_SCREENSHOT=1, so test runs leave the tree clean.
SCREENSHOTS = (REPO / "test-artifacts" / "console.png",) + (
    (REPO / "docs" / "console.png",) if os.environ.get("AGENTIFY_UPDATE_SCREENSHOT") == "1" else ()
)


async def test_a_task_run_from_the_page_shows_its_trace_and_log_lines_live(
    tmp_path: Path, scripted_model: ModelServer, browser: Browser
) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    config = write_config(tmp_path, [fs_backend(workspace)])
    problems: list[str] = []
    async with console_gateway(config, gateway_env(scripted_model), tmp_path / "stderr.log") as console:
        page = await open_page(browser, problems)
        await page.goto(f"{console.url}/?token={console.token}")
        await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        assert "token" not in page.url  # the page keeps it in its tab's sessionStorage, out of the address bar
        await expect(page.locator('[data-backend="fs"] .badge')).to_have_text("ready")
        await expect(page.locator('[data-backend="fs"] .chip', has_text="read_text_file")).to_be_visible()
        await expect(page.locator("#task-cwd")).not_to_have_value("")

        await page.fill("#task-query", "delete the whole disk")  # the model finds no tool: a failed trace
        await page.fill("#task-cwd", str(workspace))
        await page.click("#task-run")
        await expect(page.locator('#trace-list li[data-status="error"]')).to_be_visible()
        await expect(page.locator("#task-result-badge")).to_have_text("no_plan")

        await page.fill("#task-query", "read notes.txt")
        await page.click("#task-run")
        await expect(page.locator("#task-result-text")).to_have_text("remember the milk\n")
        done = page.locator('#trace-list li.selected[data-status="ok"]', has_text="read notes.txt")
        await expect(done).to_be_visible()
        detail = page.locator("#trace-detail")
        for span in ("validate", "plan", "call"):
            await expect(detail.locator(f'.span-row[data-span="{span}"]')).to_be_visible()
        await expect(detail.locator(".span-row", has_text="gen_ai.usage.input_tokens=120")).to_be_visible()
        await expect(detail.locator("#trace-log-list li", has_text="plan: fs.read_text_file")).to_be_visible()
        await expect(page.locator("#log-list li", has_text="plan: fs.read_text_file")).to_be_visible()
        await expect(page.locator("#tasks")).to_contain_text("2 (0 running, 1 ok, 1 failed)")

        await page.select_option("#log-level", "30")
        await expect(page.locator('#log-list li[data-level="INFO"]')).to_have_count(0)
        await page.select_option("#log-level", "20")
        await page.fill("#log-search", "read_text_file")
        await expect(page.locator("#log-list li").first).to_contain_text("read_text_file")
        await page.fill("#log-search", "")

        response = detail.locator("details", has=page.locator("summary", has_text="Response"))
        await response.locator("summary").click()
        await expect(response.locator("pre.json")).to_contain_text('"gen_ai.tool.call.result": "remember the milk\\n"')
        for path in SCREENSHOTS:
            path.parent.mkdir(exist_ok=True)
            await page.screenshot(path=str(path))
        await page.click("#config-box summary")
        await expect(page.locator("#config")).to_contain_text('"apiKey": "[REDACTED]"')
        assert not problems, problems  # before the gateway stops and the page starts to reconnect


async def test_the_page_reconnects_by_itself_when_the_gateway_restarts(tmp_path: Path, browser: Browser) -> None:
    config = write_config(tmp_path, [])
    env = gateway_env(None, AGENTIFY_DEBUG_TOKEN=TOKEN)  # a fixed token, so the tab's copy stays valid
    port = free_port()
    problems: list[str] = []
    page = await open_page(browser, problems)
    connection = page.locator("#connection")
    async with console_gateway(config, env, tmp_path / "first.log", port=port) as first:
        await page.goto(f"{first.url}/?token={TOKEN}")
        await expect(connection).to_have_attribute("data-state", "live")
        first_pid = (await first.get("/api/status"))["pid"]
        await expect(page.locator("#version")).to_contain_text(f"pid {first_pid}")
    await expect(connection).to_have_attribute("data-state", "reconnecting")
    async with console_gateway(config, env, tmp_path / "second.log", port=port) as second:
        second_pid = (await second.get("/api/status"))["pid"]
        await expect(connection).to_have_attribute("data-state", "live")
        await expect(page.locator("#version")).to_contain_text(f"pid {second_pid}")
    assert first_pid != second_pid
    # While the gateway was down, the page's attempts failed as network errors; nothing else went wrong.
    assert all("ERR_CONNECTION_REFUSED" in p or "WebSocket" in p for p in problems), problems


class _Recorder(BaseHTTPRequestHandler):
    """Another local web server: remembers every request line and header it receives."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.requestline + "\n" + str(self.headers))
        body = b"<!doctype html><title>another local server</title><p>hello"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def other_local_server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_the_page_works_without_a_cookie_and_no_other_local_server_receives_the_token(
    tmp_path: Path, scripted_model: ModelServer, browser: Browser
) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    config = write_config(tmp_path, [fs_backend(workspace)])
    problems: list[str] = []
    async with console_gateway(config, gateway_env(scripted_model), tmp_path / "stderr.log") as console:
        with other_local_server() as (other_url, seen):
            context = await browser.new_context()
            page = await open_page(context, problems)
            await page.goto(f"{console.url}/?token={console.token}")
            await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
            assert page.url == f"{console.url}/"  # the token left the address bar
            assert console.token not in json.dumps(await page.evaluate("history.state"))
            assert await context.cookies() == []  # nothing a browser would send to another port

            await page.reload()  # the tab kept its token: still live, and tasks still run
            await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
            await page.fill("#task-query", "read notes.txt")
            await page.fill("#task-cwd", str(workspace))
            await page.click("#task-run")
            await expect(page.locator("#task-result-text")).to_have_text("remember the milk\n")

            await page.goto(f"{other_url}/")  # the same browser visits another web server on 127.0.0.1
            await expect(page.locator("p")).to_have_text("hello")
            other_tab = await open_page(context, [])
            await other_tab.goto(f"{console.url}/")  # a new tab has no token: it says so, and sends none
            await expect(other_tab.locator("#connection")).to_have_attribute("data-state", "denied")
            await expect(other_tab.locator("#banner")).to_contain_text("no console token")
        assert seen and all(console.token not in request for request in seen), seen
        assert not any("cookie:" in request.lower() for request in seen), seen
    assert not problems, problems


async def test_the_task_box_stays_whole_beside_many_backends_and_each_backend_charts_its_latency(
    tmp_path: Path, scripted_model: ModelServer, browser: Browser
) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    # The other four cannot read, so every "read notes.txt" goes to fs (identical backends tie).
    reads = {"deny": ["read_text_file", "read_file", "read_media_file", "read_multiple_files"]}
    backends = [fs_backend(workspace)] + [fs_backend(workspace, id=f"fs{n}", tools=reads) for n in range(2, 6)]
    config = write_config(tmp_path, backends)
    problems: list[str] = []
    async with console_gateway(config, gateway_env(scripted_model), tmp_path / "stderr.log") as console:
        page = await open_page(browser, problems)
        await page.goto(f"{console.url}/?token={console.token}")
        for backend in ("fs", "fs5"):
            await expect(page.locator(f'[data-backend="{backend}"] .badge')).to_have_text("ready")
        await page.fill("#task-cwd", str(workspace))
        for _ in range(3):
            await page.fill("#task-query", "read notes.txt")
            await page.click("#task-run")
            await expect(page.locator("#task-result-text")).to_have_text("remember the milk\n")
            await expect(page.locator("#task-run")).to_be_enabled()
        chart = page.locator('[data-latency="fs"]')
        await expect(chart.locator(".latency-bar")).to_have_count(3)
        await expect(chart.locator(".latency-label")).to_contain_text("3 calls · median")
        await expect(page.locator('[data-latency="fs2"]')).to_have_count(0)  # no calls, no chart

        # The whole task box is shown: nothing of it is cut off by the panels below it.
        clipped = await page.locator("#task-panel").evaluate("(box) => box.scrollHeight - box.clientHeight")
        assert clipped <= 1, f"the task box hides {clipped} px of itself"
        await page.locator("#task-panel").screenshot(path=str(tmp_path / "task-panel.png"))
        path = REPO / "test-artifacts" / "console-backends.png"
        path.parent.mkdir(exist_ok=True)
        await page.screenshot(path=str(path))
        assert not problems, problems
