"""`serve` follows its config file: a valid change starts, stops and restarts exactly the backends it
touches (the others keep their process), and the IDE is told the tools changed; an invalid change is
logged and the running config stays. In both protocol eras."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import fake_backend, gateway_env, pid_alive, text_of, wait_until
from tests.integration.ide_client import MODES, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LIMIT = 90.0  # generous: the machine is shared


def write(path: Path, backends: list[dict[str, Any]]) -> None:
    """Replaces the file the way editors save: a new file renamed over the old one."""
    draft = path.with_suffix(".tmp")
    draft.write_text(json.dumps({"backends": backends}))
    draft.replace(path)


async def settled(client: Any, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The backends once exactly `ids` are listed and ready (bounded)."""
    with anyio.fail_after(LIMIT):
        while True:
            listing = await client.call_tool("list_backends", {})
            backends = {b["id"]: b for b in (listing.structured_content or {})["backends"]}
            if set(backends) == ids and all(b["state"] == "ready" for b in backends.values()):
                return backends
            await anyio.sleep(0.1)


@pytest.mark.parametrize("mode", MODES)
async def test_a_changed_config_file_reconciles_the_backends_and_tells_the_ide(tmp_path: Path, mode: str) -> None:
    config = tmp_path / "agentify.json"
    keep, changing = fake_backend("keep"), fake_backend("changing", description="before")
    write(config, [keep, fake_backend("gone"), changing])
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    stderr = tmp_path / "stderr.log"
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))

    async def listen(client: Any, *, task_status: Any) -> None:
        """2026-07-28: change notifications come only on a `subscriptions/listen` stream."""
        async with client.listen(tools_list_changed=True) as subscription:
            task_status.started()
            async for _ in subscription:
                told.set()

    async with (
        ide_client(config, env, stderr, mode, message_handler=on_message) as client,
        anyio.create_task_group() as tg,
    ):
        before = await settled(client, {"keep", "gone", "changing"})
        if mode == "auto":
            await tg.start(listen, client)
        write(config, [keep, fake_backend("changing", description="after"), fake_backend("added")])
        with anyio.fail_after(LIMIT):
            await told.wait()
        after = await settled(client, {"keep", "changing", "added"})
        assert after["keep"]["pid"] == before["keep"]["pid"]  # untouched: the same process, the same session
        assert after["changing"]["pid"] != before["changing"]["pid"]
        await wait_until(lambda: not pid_alive(before["gone"]["pid"]) and not pid_alive(before["changing"]["pid"]))

        config.write_text('{"backends": [')  # a half-saved edit
        await wait_until(lambda: "the running config stays" in stderr.read_text(), LIMIT)
        still = await settled(client, {"keep", "changing", "added"})
        assert {i: b["pid"] for i, b in still.items()} == {i: b["pid"] for i, b in after.items()}
        echoed = await client.call_tool("call_tool", {"name": "keep__echo", "arguments": {"text": "hi"}})
        assert not echoed.is_error
        tg.cancel_scope.cancel()
    log = stderr.read_text()
    assert "reloaded: added added, removed gone, restarted changing" in log, log
    assert "is not valid JSON" in log, log


async def test_a_config_edited_into_deep_nesting_keeps_the_running_config_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "agentify.json"
    write(config, [fake_backend("keep")])
    stderr = tmp_path / "stderr.log"
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    async with ide_client(config, env, stderr, "legacy") as client:
        before = await settled(client, {"keep"})
        config.write_text('{"a":' + "[" * 200_000)
        await wait_until(lambda: "the running config stays" in stderr.read_text(), LIMIT)
        still = await settled(client, {"keep"})
        assert still["keep"]["pid"] == before["keep"]["pid"]
    log = stderr.read_text()
    assert "nests deeper than 64 levels" in log and "Traceback" not in log and "RecursionError" not in log, log


async def test_a_reload_applies_new_limits_at_once_and_names_the_keys_needing_a_restart_once(tmp_path: Path) -> None:
    config = tmp_path / "agentify.json"
    write(config, [fake_backend("keep")])
    stderr = tmp_path / "stderr.log"
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
    async with ide_client(config, env, stderr, "legacy") as client:
        await settled(client, {"keep"})
        edited = {
            "backends": [fake_backend("keep")],
            "maxQueryChars": 50,
            "server": {"limits": {"perPrincipal": "5/minute"}},
        }
        config.write_text(json.dumps(edited))
        await wait_until(lambda: "take effect only when agentify starts again" in stderr.read_text(), LIMIT)
        long_query = await client.call_tool("search_tools", {"query": "x" * 100})
        assert not long_query.is_error  # the old maxQueryChars still applies, as the warning says
        listed = [await client.call_tool("list_backends", {}) for _ in range(5)]
    assert [r.is_error for r in listed] == [False] * 4 + [True]  # the limit applies at once: the sixth call
    refused = listed[-1]
    assert (refused.meta or {})["agentify/error"]["code"] == "rate_limited", refused
    assert "over the limit of 5 per minute" in text_of(refused)
    warned = [line for line in stderr.read_text().splitlines() if "take effect only when" in line]
    assert len(warned) == 1 and "changed maxQueryChars, which" in warned[0], warned
