"""The relay of a backend's log messages, in process: what one message becomes, and a flood's bounded cost."""

from __future__ import annotations

import time

import anyio
import mcp_types as types
import pytest
from loguru import logger

from agentify.mcp_server.logs import CALL_PENDING, MAX_DATA_CHARS, UNOWNED_PER_SECOND, CallLogs, LogRelay, relayed
from agentify.security.redact import MASK, Redactor

pytestmark = pytest.mark.anyio

SECRET = "backend-env-secret-0042"
Params = types.LoggingMessageNotificationParams


def test_a_message_is_masked_named_for_its_backend_and_bounded() -> None:
    redactor = Redactor([SECRET])
    small = relayed(redactor, "fs", Params(level="info", logger="db", data={"token": SECRET, "n": 1}))
    assert (small.level, small.logger, small.data) == ("info", "fs.db", {"token": MASK, "n": 1})
    assert relayed(redactor, "fs", Params(level="error", data="x")).logger == "fs"
    huge = relayed(redactor, "fs", Params(level="info", logger="l" * 5000, data=["a" * 100_000, SECRET]))
    assert isinstance(huge.data, str) and len(huge.data) < MAX_DATA_CHARS + 100 and "cut" in huge.data
    assert huge.logger is not None and len(huge.logger) < 300


async def test_a_flood_waits_in_bounded_memory_and_the_client_is_told_how_many_were_dropped() -> None:
    sent: list[Params] = []
    writing = anyio.Event()

    async def send(params: Params) -> None:
        await writing.wait()  # the client reads slower than the backend logs
        sent.append(params)

    logs = CallLogs("info", send, Redactor())
    async with anyio.create_task_group() as tg:
        tg.start_soon(logs.deliver)
        for n in range(50_000):
            logs.heard("fast", Params(level="info", data=n))
            logs.heard("fast", Params(level="debug", data="below the call's level"))
        writing.set()
        with anyio.fail_after(10):
            await logs.settled()
        tg.cancel_scope.cancel()
    data = [p.data for p in sent if p.logger == "fast"]
    assert data == list(range(CALL_PENDING))  # the first ones, in order
    [note] = [p for p in sent if p.logger == "agentify"]
    assert note.level == "warning" and str(note.data).startswith(f"{50_000 - CALL_PENDING} log messages")


async def test_over_http_a_flood_nobodys_call_owns_writes_a_bounded_number_of_lines_and_says_how_many_it_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[str] = []
    sink = logger.add(lambda line: written.append(str(line)), level="DEBUG", format="{message}")
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # the relay's seconds, not the code under test
    try:
        relay = LogRelay(Redactor([SECRET]), lambda level: None, own_level="debug")
        async with anyio.create_task_group() as tg:
            await tg.start(relay.run)
            for n in range(10_000):
                relay.heard("flood", Params(level="info", data=f"line {n} {SECRET}"))
            relay.heard("quiet", Params(level="info", data="one line of another backend"))
            clock[0] += 1.5
            relay.heard("flood", Params(level="info", data="the next second"))
            relay.close()
    finally:
        logger.remove(sink)
    flood = [line for line in written if "'flood'" in line or line.startswith("flood logged")]
    assert len([line for line in flood if "logged (no single call owns it)" in line]) == UNOWNED_PER_SECOND + 1
    assert any(f"{10_000 - UNOWNED_PER_SECOND} were not written" in line for line in flood), flood[-3:]
    assert any("one line of another backend" in line for line in written)  # another backend keeps its own share
    assert not any(SECRET in line for line in written)
