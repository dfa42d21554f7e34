"""forwardRoots: a backend that forwards roots is answered with the roots the manager was given, and told of changes.

Driven in-process through `BackendManager` (the gateway wires the IDE's roots into it), against
server-everything over stdio, whose get-roots-list tool shows the roots it received."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest

from agentify.backends import BackendManager
from agentify.config import BackendConfig
from tests.servers import EVERYTHING

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def text(result: types.CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_roots_reach_a_forwarding_backend_and_changes_are_announced(tmp_path: Path) -> None:
    specs = [
        BackendConfig(id="fwd", command="node", args=[str(EVERYTHING), "stdio"], forward_roots=True),
        BackendConfig(id="plain", command="node", args=[str(EVERYTHING), "stdio"]),
    ]
    manager = BackendManager(specs, cache_dir=tmp_path)
    manager.forward_roots([types.Root(uri="file:///work/first", name="first")])
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        try:
            catalog = await manager.catalog()
            assert catalog.find("plain", "get-roots-list") is None  # registered only for clients with roots
            handle = catalog.find("fwd", "get-roots-list")
            assert handle is not None
            assert "file:///work/first" in text(await handle.call({}))
            manager.forward_roots([types.Root(uri="file:///work/second", name="second")])
            with anyio.fail_after(15):
                while "file:///work/second" not in text(await handle.call({})):  # noqa: ASYNC110 - state of another process
                    await anyio.sleep(0.05)
        finally:
            manager.close()
    assert manager.closed.is_set()
