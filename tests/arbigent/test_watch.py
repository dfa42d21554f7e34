"""The project watcher reads and parses off the event loop (issue 13, item 10), driven in process.

The parse is made to block until the test lets it go; meanwhile the server must keep answering.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession, IncomingMessage

import agentify.arbigent.server as server_module
from agentify.arbigent.catalog import build_catalog
from agentify.arbigent.project import load_project
from agentify.arbigent.runs import RunnerConfig, Runs
from agentify.arbigent.server import ArbigentServer
from agentify.arbigent.settings import RunSettings
from agentify.security.redact import Redactor

from .support import FAKE_ARBIGENT, Workspace

pytestmark = pytest.mark.anyio


async def test_requests_are_answered_while_a_project_edit_is_being_parsed(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing, release = threading.Event(), threading.Event()
    real = server_module.parse_project

    def held_parse(*args: Any) -> Any:
        if "prefs" in args[0]:  # only the edit below is held, as a big project would hold it
            parsing.set()
            release.wait(30)
        return real(*args)

    monkeypatch.setattr(server_module, "parse_project", held_parse)
    config = RunnerConfig(
        binary=FAKE_ARBIGENT, project_file=workspace.project, working_directory=workspace.root, settings=RunSettings()
    )
    app = ArbigentServer(
        catalog=build_catalog(load_project(workspace.project)),
        runs=Runs(config, Redactor(), anyio.Event()),
        redactor=Redactor(),
        poll_seconds=0.05,
    )
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    client_send, server_read = anyio.create_memory_object_stream[Any](16)
    server_send, client_read = anyio.create_memory_object_stream[Any](16)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(app.serve, server_read, server_send)
                async with ClientSession(client_read, client_send, message_handler=on_message) as session:
                    await session.initialize()
                    workspace.project.write_text(workspace.project.read_text().replace('"settings"', '"prefs"'))
                    while not parsing.is_set():  # noqa: ASYNC110 - the parse runs in a worker thread
                        await anyio.sleep(0.01)
                    with anyio.fail_after(5):
                        during = {t.name for t in (await session.list_tools()).tools}
                    release.set()
                    await changed.wait()
                    after = {t.name for t in (await session.list_tools()).tools}
                tg.cancel_scope.cancel()
    finally:
        release.set()
    assert "run-arbigent-test-settings" in during, "answered with the last good tools while the edit was parsed"
    assert "run-arbigent-test-prefs" in after and "run-arbigent-test-settings" not in after
