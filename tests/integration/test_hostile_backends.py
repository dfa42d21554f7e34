"""What a hostile or runaway backend can do to the gateway: nothing that freezes or bloats it.

Its tool schemas carry catastrophic regexes; its progress notifications come by the hundred
thousand; its messages carry the secrets of its environment; its answer is one 200 MiB line.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.conftest import ENV_SECRET, error_code, fake_backend, gateway, gateway_env, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_catastrophic_schema_pattern_is_refused_in_bounded_time(tmp_path: Path) -> None:
    """`^(a|a)+$` on 40 characters would take Python's `re` longer than the universe has left."""
    config = write_config(tmp_path, [fake_backend()])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        with anyio.fail_after(30):
            by_value = await session.call_tool(
                "call_tool", {"name": "fake__nested", "arguments": {"code": "a" * 40 + "!"}}
            )
            by_key = await session.call_tool("call_tool", {"name": "fake__nested", "arguments": {"b" * 40 + "!": "x"}})
            fine = await session.call_tool(
                "call_tool", {"name": "fake__nested", "arguments": {"code": "aaa", "bb": "x"}}
            )
            echo = await session.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "still here"}})
    for refused in (by_value, by_key):
        assert error_code(refused) == "invalid_input", text_of(refused)
        assert "took too long to check" in text_of(refused)
    assert text_of(fine) == "code accepted"
    assert text_of(echo) == "echo: still here"


async def test_a_backend_progress_message_never_shows_a_secret(tmp_path: Path) -> None:
    config = write_config(tmp_path, [fake_backend(env={"FAKE_TOKEN": ENV_SECRET})])
    messages: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        result = await session.call_tool(
            "call_tool",
            {"name": "fake__progress", "arguments": {"count": 3, "message": "using ", "env": "FAKE_TOKEN"}},
            progress_callback=on_progress,
        )
    assert text_of(result) == "reported 3"
    relayed = [m for m in messages if m and "using" in m]
    # reports that come while one is being written replace each other; the last one always arrives
    assert relayed and relayed[-1].endswith("(3/3)"), messages
    assert all("[REDACTED]" in m for m in relayed), relayed
    assert not any(ENV_SECRET in (m or "") for m in messages)


async def test_a_flood_of_progress_reaches_the_ide_in_order_and_ends_with_the_latest(tmp_path: Path) -> None:
    """200,000 queued reports once cost the gateway 600 MiB: a report waits only while the one before it is
    written, and a newer one replaces it (tests/unit/test_progress_relay.py); however many get through, they
    come in order and the last is the backend's latest."""
    count = 20_000
    config = write_config(tmp_path, [fake_backend(timeoutSeconds=300)])
    messages: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with gateway(config, gateway_env(None, AGENTIFY_LOG_LEVEL="INFO"), tmp_path / "e.log") as session:
        with anyio.fail_after(240):
            result = await session.call_tool(
                "call_tool",
                {"name": "fake__progress", "arguments": {"count": count, "message": "step"}},
                progress_callback=on_progress,
                read_timeout_seconds=240,
            )
    steps = [int(m.split("(")[1].split("/")[0]) for m in messages if m.startswith("fake.progress: step")]
    assert text_of(result) == f"reported {count}"
    assert 0 < len(steps) <= count and steps == sorted(set(steps))
    assert steps[-1] == count and messages[-1] == "done"


async def test_a_200_mib_answer_fails_the_call_with_a_clear_backend_error_in_bounded_memory(tmp_path: Path) -> None:
    """It once took the gateway to 1.08 GB; now only the limit (32 MiB) is ever held."""
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), timeoutSeconds=120)])
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        with anyio.fail_after(100):  # below the call's timeout: it fails when the answer ends, not later
            huge = await session.call_tool("call_tool", {"name": "fake__huge_answer", "arguments": {"mib": 200}})
        after = await session.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "still here"}})
        gateway_pid = int(marker.read_text().split()[2])
        peak_mib = _peak_rss_kib(gateway_pid) / 1024
    assert error_code(huge) == "backend_error", text_of(huge)
    assert "over the 32 MiB limit" in text_of(huge) and "200 MiB" in text_of(huge)
    assert text_of(after) == "echo: still here"  # the backend and its session carry on
    assert peak_mib < 400, peak_mib


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")
