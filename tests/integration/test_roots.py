"""The client's roots: a task without a working directory runs in the client's first root."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.conftest import fs_backend, gateway_env, text_of, write_config
from tests.integration.ide_client import LOGGED_MODES, MODES, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class Roots:
    """The client's workspace folders, which the user can change; counts how often it is asked."""

    def __init__(self, *paths: Path) -> None:
        self.paths = list(paths)
        self.asked = 0
        self.changed = anyio.Event()

    async def __call__(self, context: Any) -> types.ListRootsResult:
        self.asked += 1
        self.changed.set()
        roots = [types.Root(uri=p.as_uri(), name=p.name) for p in self.paths]  # type: ignore[arg-type]
        return types.ListRootsResult(roots=roots)


@pytest.mark.parametrize("mode", MODES + LOGGED_MODES)
async def test_task_without_context_reads_from_the_clients_first_root(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not this one\n")
    roots = Roots(workspace, other)
    config = write_config(tmp_path, [fs_backend(tmp_path)], planner={"provider": "offline"})
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode, list_roots_callback=roots) as client:
        first = await client.call_tool("orchestrate_task", {"query": "read notes.txt"})
        second = await client.call_tool("orchestrate_task", {"query": "read docs/guide.md"})
        explicit = await client.call_tool(
            "orchestrate_task", {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(other)}}
        )
    assert text_of(first) == "remember the milk\n", text_of(first)
    assert (first.meta or {})["agentify/plan"]["arguments"] == {"path": str(workspace / "notes.txt")}
    assert text_of(second) == "# Guide\n"
    assert text_of(explicit) == "not this one\n"  # the context's working directory wins
    assert roots.asked == 1  # kept until the client says they changed


async def test_roots_list_changed_moves_the_default_working_directory(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("the new workspace\n")
    roots = Roots(workspace)
    config = write_config(tmp_path, [fs_backend(tmp_path)], planner={"provider": "offline"})
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", "legacy", list_roots_callback=roots) as c:
        before = await c.call_tool("orchestrate_task", {"query": "read notes.txt"})
        roots.paths = [other]
        roots.changed = anyio.Event()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await c.session.send_roots_list_changed()
        with anyio.fail_after(10):
            await roots.changed.wait()  # the gateway asked for the new roots
        after = await c.call_tool("orchestrate_task", {"query": "read notes.txt"})
    assert text_of(before) == "remember the milk\n"
    assert text_of(after) == "the new workspace\n", text_of(after)


async def test_client_without_roots_gets_the_usual_message_for_a_relative_path(tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)], planner={"provider": "offline"})
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", "auto") as client:
        result = await client.call_tool("orchestrate_task", {"query": "read notes.txt"})
    assert result.is_error and "working directory" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_forward_roots_backend_serves_the_ides_workspace_once_the_gateway_knows_it(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    from tests.servers import EVERYTHING

    roots = Roots(workspace)
    backends = [
        fs_backend(tmp_path),
        {"id": "everything", "command": "node", "args": [str(EVERYTHING), "stdio"], "forwardRoots": True},
    ]
    config = write_config(tmp_path, backends, planner={"provider": "offline"})
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode, list_roots_callback=roots) as client:
        await client.call_tool("orchestrate_task", {"query": "read notes.txt"})  # the gateway learns the roots
        seen = ""
        with anyio.fail_after(30):
            while workspace.as_uri() not in seen:  # the backend re-lists roots once it is told they changed
                seen = text_of(await client.call_tool("call_tool", {"name": "everything__get-roots-list"}))
    assert workspace.as_uri() in seen
