"""expose "tools": the backends' tools in the gateway's own tools/list, called on call_tool's path, and
tools/list_changed when a backend's tools change; in both protocol eras, against real backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentify.backends.manifest import ManifestStore
from agentify.config import BackendConfig
from tests.conftest import FS_SERVER, error_code, fake_backend, fs_backend, gateway, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, answering, ide_client
from tests.servers import EVERYTHING

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def everything_backend() -> dict[str, Any]:
    return {"id": "every", "command": "node", "args": [str(EVERYTHING), "stdio"]}


async def backend_tools(workspace: Path) -> dict[str, types.Tool]:
    """The filesystem server's own tools/list, to compare with what the gateway shows."""
    params = StdioServerParameters(command="node", args=[str(FS_SERVER), str(workspace)])
    async with Client(stdio_client(params), mode="legacy") as client:
        return {t.name: t for t in (await client.list_tools()).tools}


async def test_backend_tools_are_listed_prefixed_as_the_backend_describes_them_and_called_directly(
    tmp_path: Path, workspace: Path
) -> None:
    trace_file = tmp_path / "traces.jsonl"
    config = write_config(tmp_path, [fs_backend(workspace)], expose=["tools"], traceFile=str(trace_file))
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        read = await session.call_tool(
            "fs__read_text_file", {"path": str(workspace / "notes.txt")}, progress_callback=on_progress
        )
        bad = await session.call_tool("fs__read_text_file", {"file": "notes.txt"})
        gone = await session.call_tool("orchestrate_task", {"query": "read notes.txt"})
    own = await backend_tools(workspace)
    assert set(listed) == {f"fs__{name}" for name in own}  # only the backend's tools: orchestrate is not exposed
    shown = listed["fs__read_text_file"]
    assert shown.input_schema == own["read_text_file"].input_schema
    assert shown.annotations == own["read_text_file"].annotations
    assert shown.description == own["read_text_file"].description
    assert not read.is_error and text_of(read) == "remember the milk\n"
    assert (read.meta or {})["agentify/plan"]["planner"] == "ide"
    assert progress == ["calling fs.read_text_file", "done"]
    assert error_code(bad) == "invalid_input" and "path" in text_of(bad)
    assert error_code(gone) == "invalid_input"
    assert "unknown tool 'orchestrate_task'; this gateway offers the backend tools" in text_of(gone)
    assert '"kind": "call"' in trace_file.read_text()


async def test_without_prefix_tools_keep_their_names_unless_two_backends_share_one(
    tmp_path: Path, workspace: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("the other notes\n")
    backends = [fs_backend(workspace), fs_backend(other, id="fs2"), everything_backend()]
    config = write_config(tmp_path, backends, expose=["tools", "search"], prefix=False)
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        names = {t.name for t in (await session.list_tools()).tools}
        echo = await session.call_tool("echo", {"message": "hello"})
        first = await session.call_tool("fs__read_text_file", {"path": str(workspace / "notes.txt")})
        second = await session.call_tool("fs2__read_text_file", {"path": str(other / "notes.txt")})
        ambiguous = await session.call_tool("read_text_file", {"path": str(workspace / "notes.txt")})
    assert {"echo", "search_tools", "call_tool", "fs__read_text_file", "fs2__read_text_file"} <= names
    assert "read_text_file" not in names and "every__echo" not in names
    assert not echo.is_error and "hello" in text_of(echo)
    assert text_of(first) == "remember the milk\n" and text_of(second) == "the other notes\n"
    assert error_code(ambiguous) == "invalid_input"


@pytest.mark.parametrize("mode", MODES)
async def test_an_exposed_destructive_tool_asks_the_user_first_in_both_eras(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    target = workspace / "out.txt"
    config = write_config(tmp_path, [fs_backend(workspace)], expose=["tools"])
    seen: list[types.ElicitRequestParams] = []
    call = {"path": str(target), "content": "from the IDE"}
    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", mode, elicitation_callback=answering("decline", seen)
    ) as client:
        declined = await client.call_tool("fs__write_file", call)
    assert error_code(declined) == "denied" and not target.exists()
    assert len(seen) == 1 and "write_file" in seen[0].message
    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", mode, elicitation_callback=answering("accept")
    ) as client:
        accepted = await client.call_tool("fs__write_file", call)
    assert not accepted.is_error, text_of(accepted)
    assert target.read_text() == "from the IDE"


async def test_the_tool_list_follows_a_backend_whose_tools_change_in_the_2025_era(tmp_path: Path) -> None:
    send, notifications = anyio.create_memory_object_stream[None](10)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            send.send_nowait(None)

    config = write_config(tmp_path, [fake_backend()], expose=["tools"])
    log = tmp_path / "e.log"
    with send, notifications:
        async with ide_client(config, gateway_env(None), log, "legacy", message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            await client.call_tool("fake__grow", {})
            with anyio.fail_after(15):
                async for _ in notifications:  # a notification from the start-up may come first
                    if "fake__grown0" in {t.name for t in (await client.list_tools()).tools}:
                        break
    assert "fake__grow" in before and "fake__grown0" not in before


async def test_the_tool_list_follows_a_backend_whose_tools_change_in_the_2026_era(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend()], expose=["tools"])
    async with ide_client(config, gateway_env(None), tmp_path / "e.log", "auto") as client:
        before = {t.name for t in (await client.list_tools()).tools}
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("fake__grow", {})
            with anyio.fail_after(15):
                async for event in subscription:
                    assert type(event).__name__ == "ToolsListChanged"
                    if "fake__grown0" in {t.name for t in (await client.list_tools()).tools}:
                        break
    assert "fake__grow" in before and "fake__grown0" not in before


async def test_the_tool_list_follows_a_lazy_backend_started_with_other_tools_than_its_manifest(tmp_path: Path) -> None:
    lazy = fake_backend("lazy", start="lazy")
    echo = types.Tool(name="echo", description="Echo the text back", input_schema={"type": "object"})
    ManifestStore(tmp_path / "cache").save(BackendConfig.model_validate(lazy), [echo])  # an older version's tools
    send, notifications = anyio.create_memory_object_stream[None](10)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            send.send_nowait(None)

    config = write_config(tmp_path, [lazy], expose=["tools"])
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    with send, notifications:
        async with ide_client(config, env, tmp_path / "e.log", "legacy", message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("lazy__echo", {"text": "wake up"})  # starts it
            with anyio.fail_after(15):
                async for _ in notifications:
                    if "lazy__slow" in {t.name for t in (await client.list_tools()).tools}:
                        break
    assert before == {"lazy__echo"}  # planned from the manifest, not started
    assert text_of(echoed) == "echo: wake up"
