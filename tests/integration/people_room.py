"""One scenario both per-person backends share (`maxPeople: 1`): bob needs the room of alice's session while her
slow read runs. Nobody's read is stopped under them: bob is told to try again, gets his read once hers is done,
and then hers works again (`backends/people.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import contents_text, wait_until


async def bob_needs_alices_room(alices: Any, bobs: Any, slow: str, uri: str, backend_log: Path) -> dict[str, Any]:
    """With alice's and bob's clients (both have had a session, bob's made room by ending alice's): alice reads the
    slow resource `slow`; once the backend's `backend_log` says it "reads slowly", bob reads `uri`, then again after
    hers, then alice. Returns each result by name ("slow", "bob", "alice") and bob's first refusal ("refused")."""
    outcome: dict[str, Any] = {}

    async def slow_read() -> None:
        outcome["slow"] = await alices.read_resource(slow)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow_read)
        await wait_until(lambda: "reads slowly" in backend_log.read_text())
        with pytest.raises(MCPError) as refused:
            await bobs.read_resource(uri)
    outcome["refused"] = refused.value.error
    outcome["bob"] = await bobs.read_resource(uri)
    outcome["alice"] = await alices.read_resource(uri)
    return outcome


def assert_nobody_lost_their_read(outcome: dict[str, Any], slow_text: str, text: str) -> None:
    """Alice's slow read finished with `slow_text`; bob was told the backend serves its most people and to try
    again; then both read `text`."""
    assert contents_text(outcome["slow"]) == slow_text
    refused = outcome["refused"]
    assert "1 people with calls or reads in flight" in refused.message, refused
    assert "try again" in refused.message
    assert contents_text(outcome["bob"]) == contents_text(outcome["alice"]) == text
