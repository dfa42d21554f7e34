"""The backends' resources, prompts and completions through the gateway, as an IDE on either protocol era sees
them: server-everything and the filesystem server from node_modules, the arbigent runner with the fake CLI."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from tests.conftest import AGENTIFY, REPO, fs_backend, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, every_resource, ide_client
from tests.integration.test_arbigent_gateway import offline_backend
from tests.servers import EVERYTHING, free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


def everything_backend(**extra: Any) -> dict[str, Any]:
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run scripts/setup.sh (npm install) first")
    return {"id": "everything", "command": "node", "args": [str(EVERYTHING), "stdio"]} | extra


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")} | gateway_env(None, AGENTIFY_PLANNER="offline") | extra


@pytest.mark.parametrize("mode", MODES)
async def test_server_everythings_resources_prompts_and_completions_reach_the_ide(tmp_path: Path, mode: str) -> None:
    config = write_config(tmp_path, [everything_backend(), fs_backend(tmp_path)])
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", mode) as client:
        caps = client.server_capabilities
        assert caps.resources is not None and caps.prompts is not None and caps.completions is not None
        resources = await every_resource(client)
        documents = [r for r in resources if str(r.uri).startswith("demo://resource/static/document/")]
        assert documents, [str(r.uri) for r in resources]
        read = await client.read_resource(str(documents[0].uri), cache_mode="bypass")
        assert read.contents[0].uri == documents[0].uri and isinstance(read.contents[0], types.TextResourceContents)
        templates = await client.list_resource_templates(cache_mode="bypass")
        assert TEXT_TEMPLATE in [t.uri_template for t in templates.resource_templates]
        dynamic = await client.read_resource("demo://resource/dynamic/text/3", cache_mode="bypass")
        assert dynamic.contents[0].text.startswith("Resource 3: ")  # type: ignore[union-attr]

        prompts = [p.name for p in (await client.list_prompts(cache_mode="bypass")).prompts]
        assert {"everything__simple-prompt", "everything__args-prompt", "everything__completable-prompt"} <= set(
            prompts
        )
        got = await client.get_prompt("everything__args-prompt", {"city": "Lisbon"})
        assert "Lisbon" in got.messages[0].content.text  # type: ignore[union-attr]
        department = types.PromptReference(name="everything__completable-prompt")
        completed = await client.complete(department, {"name": "department", "value": "Eng"})
        assert completed.completion.values == ["Engineering"]
        named = await client.complete(
            department, {"name": "name", "value": ""}, context_arguments={"department": "Sales"}
        )
        assert named.completion.values == ["David", "Eve", "Frank"]
        template = types.ResourceTemplateReference(uri=TEXT_TEMPLATE)
        by_id = await client.complete(template, {"name": "resourceId", "value": "12"})
        assert by_id.completion.values == ["12"]

        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("everything__no-such-prompt")
        assert "no-such-prompt" in unknown.value.error.message


@pytest.mark.parametrize("mode", MODES)
async def test_without_prefix_prompts_keep_their_names_except_where_two_backends_share_one(
    tmp_path: Path, mode: str
) -> None:
    """Two server-everythings list the same prompts, so theirs stay `<backend>__<prompt>`; the conformance
    backend's are its alone, so they keep their names, and get and complete route by those names."""
    conformance = {"id": "conf", "command": sys.executable, "args": [str(REPO / "tests/fakes/conformance_backend.py")]}
    backends = [everything_backend(id="e1"), everything_backend(id="e2"), conformance]
    config = write_config(tmp_path, backends, prefix=False)
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", mode) as client:
        names: list[str] = []
        cursor: str | None = None
        with anyio.fail_after(30):
            while not names or cursor:
                page = await client.list_prompts(cursor=cursor, cache_mode="bypass")
                names += [p.name for p in page.prompts]
                cursor = page.next_cursor
        assert {"e1__simple-prompt", "e2__simple-prompt", "test_simple_prompt", "test_prompt_with_arguments"} <= set(
            names
        ), names
        assert "simple-prompt" not in names
        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert "a" in got.messages[0].content.text  # type: ignore[union-attr]
        shared = await client.get_prompt("e2__args-prompt", {"city": "Lisbon"})
        assert "Lisbon" in shared.messages[0].content.text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="Unknown prompt: simple-prompt"):
            await client.get_prompt("simple-prompt")  # two backends have it: the name alone says not whose


async def until_ready(client: Client) -> None:
    with anyio.fail_after(60):
        while True:
            listed = await client.call_tool("list_backends", {})
            if all(b["state"] == "ready" for b in (listed.structured_content or {})["backends"]):
                return
            await anyio.sleep(0.1)


@pytest.mark.parametrize("mode", MODES)
async def test_the_filesystem_server_alone_adds_no_resources_prompts_nor_completions(tmp_path: Path, mode: str) -> None:
    """It offers tools only. What a backend offers is kept in its manifest, so the next start declares it at once."""
    config = write_config(tmp_path, [fs_backend(tmp_path)])
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", mode) as client:
        await until_ready(client)
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", mode) as client:
        caps = client.server_capabilities
        assert (caps.resources, caps.prompts, caps.completions) == (None, None, None)
        assert caps.tools is not None


async def test_a_lazy_backend_lists_from_its_manifest_and_starts_for_a_read(tmp_path: Path) -> None:
    eager = write_config(tmp_path, [everything_backend()])
    async with ide_client(eager, env_for(tmp_path), tmp_path / "stderr.log", "legacy") as client:
        await until_ready(client)
        learnt = {str(r.uri) for r in await every_resource(client)}
    lazy = write_config(tmp_path, [everything_backend(start="lazy")])
    async with ide_client(lazy, env_for(tmp_path), tmp_path / "stderr.log", "legacy") as client:
        caps = client.server_capabilities
        listed = {str(r.uri) for r in await every_resource(client)}
        prompts = (await client.list_prompts(cache_mode="bypass")).prompts
        before = (await client.call_tool("list_backends", {})).structured_content or {}
        read = await client.read_resource(sorted(listed)[0], cache_mode="bypass")
        after = (await client.call_tool("list_backends", {})).structured_content or {}
    assert caps.resources is not None and caps.resources.subscribe and caps.completions is not None
    assert listed == learnt and "everything__simple-prompt" in [p.name for p in prompts]
    assert [b["state"] for b in before["backends"]] == ["idle"]  # listed without starting it
    assert read.contents and [b["state"] for b in after["backends"]] == ["ready"]


async def test_denied_resources_and_prompts_are_neither_listed_nor_read(tmp_path: Path) -> None:
    backend = everything_backend(
        resources={"deny": ["demo://resource/static/document/*.md"]}, prompts={"allow": ["simple-prompt"]}
    )
    config = write_config(tmp_path, [backend])
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", "legacy") as client:
        resources = await every_resource(client)
        assert not [r for r in resources if str(r.uri).endswith(".md")]
        with pytest.raises(MCPError) as denied:
            await client.read_resource("demo://resource/static/document/architecture.md", cache_mode="bypass")
        assert denied.value.error.code == types.INVALID_PARAMS
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("nowhere://at/all", cache_mode="bypass")
        assert unknown.value.error.code == denied.value.error.code  # a denied URI looks like an unknown one
        assert denied.value.error.message.startswith("Resource not found: ")
        assert [p.name for p in (await client.list_prompts(cache_mode="bypass")).prompts] == [
            "everything__simple-prompt"
        ]
        with pytest.raises(MCPError):
            await client.get_prompt("everything__args-prompt", {"city": "Lisbon"})


async def test_a_subscribed_resources_updates_reach_a_2025_ide(tmp_path: Path) -> None:
    """server-everything sends `resources/updated` for subscribed URIs once its toggle tool is called."""
    updates: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            updated.set()

    uri = "demo://resource/dynamic/text/1"
    config = write_config(tmp_path, [everything_backend()])
    async with ide_client(
        config, env_for(tmp_path), tmp_path / "stderr.log", "legacy", message_handler=on_message
    ) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
        toggled = await client.call_tool(
            "call_tool", {"name": "everything__toggle-subscriber-updates", "arguments": {}}
        )
        assert not toggled.is_error, text_of(toggled)
        with anyio.fail_after(30):
            await updated.wait()
    assert set(updates) == {uri}


async def test_a_subscription_is_made_again_when_its_backend_restarts(tmp_path: Path) -> None:
    """A restarted backend's new session holds no subscription: without renewing it, updates stop silently."""
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.set()

    config = write_config(tmp_path, [everything_backend()])
    async with ide_client(
        config, env_for(tmp_path), tmp_path / "stderr.log", "legacy", message_handler=on_message
    ) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource("demo://resource/dynamic/text/1")
        first = await _everything(client)
        os.killpg(first["pid"], signal.SIGKILL)
        with anyio.fail_after(60):
            while True:  # polled: the state is only seen through list_backends
                if (await _everything(client))["state"] != "ready":
                    break
                await anyio.sleep(0.1)
        toggled = await client.call_tool(  # the next call starts it again
            "call_tool", {"name": "everything__toggle-subscriber-updates", "arguments": {}}
        )
        assert not toggled.is_error, text_of(toggled)
        assert (await _everything(client))["pid"] != first["pid"]
        with anyio.fail_after(30):
            await updated.wait()


async def _everything(client: Client) -> dict[str, Any]:
    listed = await client.call_tool("list_backends", {})
    (backend,) = (listed.structured_content or {})["backends"]
    return dict(backend)


async def test_a_resource_a_2026_ide_listens_to_is_subscribed_at_its_backend(tmp_path: Path) -> None:
    uri = "demo://resource/dynamic/text/2"
    config = write_config(tmp_path, [everything_backend()])
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", "auto") as client:
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            toggled = await client.call_tool(
                "call_tool", {"name": "everything__toggle-subscriber-updates", "arguments": {}}
            )
            assert not toggled.is_error, text_of(toggled)
            with anyio.fail_after(30):
                event = await anext(subscription)
    assert event == ResourceUpdated(uri=uri)


# ----- the seed's flow: a failing arbigent run, and its report and screenshot read back -----------------


def arbigent_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, [offline_backend(tmp_path, FAKE_ARBIGENT_FAIL="logout")])


def screenshot_file(tmp_path: Path, uri: str) -> Path:
    return tmp_path / "arbigent-work" / "arbigent-result" / "screenshots" / uri.rsplit("/", 1)[-1]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_runs_report_and_screenshot_links_are_readable_through_the_gateway(
    tmp_path: Path, mode: str
) -> None:
    async with ide_client(arbigent_config(tmp_path), env_for(tmp_path), tmp_path / "stderr.log", mode) as client:
        with anyio.fail_after(60):
            result = await client.call_tool("orchestrate_task", {"query": "run the login tests"})
        assert result.is_error, text_of(result)  # the failing scenario, passed through
        links = {str(b.uri): b for b in result.content if isinstance(b, types.ResourceLink)}
        [report] = [uri for uri in links if uri.endswith("/report.html")]
        [shot] = [uri for uri, link in links.items() if link.mime_type == "image/png"]
        page = await client.read_resource(report, cache_mode="bypass")
        image = await client.read_resource(shot, cache_mode="bypass")
        listed = {str(r.uri) for r in await every_resource(client)}
    [html] = page.contents
    assert isinstance(html, types.TextResourceContents) and html.mime_type == "text/html" and "logout" in html.text
    [blob] = image.contents
    assert isinstance(blob, types.BlobResourceContents) and str(blob.uri) == shot
    assert base64.b64decode(blob.blob) == screenshot_file(tmp_path, shot).read_bytes()
    assert {report, shot} <= listed


async def test_the_typescript_client_reads_a_failing_runs_links(tmp_path: Path) -> None:
    node = shutil.which("node") or pytest.fail("node is not on PATH")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")} | env_for(tmp_path)
    spec = {
        "command": str(AGENTIFY),
        "args": ["serve", "--config", str(arbigent_config(tmp_path))],
        "env": env,
        "stderrFile": str(tmp_path / "stderr.log"),
        "mode": "auto",
        "elicitation": None,
        "calls": [{"name": "orchestrate_task", "arguments": {"query": "run the login tests"}}],
        "readLinks": True,
    }
    with anyio.fail_after(90):
        done = await anyio.run_process([node, str(REPO / "tests/ts_client.mjs"), json.dumps(spec)], check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    answer = json.loads(done.stdout)
    assert answer["protocolVersion"] == "2026-07-28" and "resources" in answer["capabilities"]
    links = [b["uri"] for b in answer["results"][0]["content"] if b["type"] == "resource_link"]
    assert [r["contents"][0]["uri"] for r in answer["read"]] == links and len(links) == 3
    [shot] = [r["contents"][0] for r in answer["read"] if r["contents"][0].get("mimeType") == "image/png"]
    assert base64.b64decode(shot["blob"]) == screenshot_file(tmp_path, shot["uri"]).read_bytes()


# ----- list changes ------------------------------------------------------------------------------


async def test_a_backends_resource_list_change_reaches_a_2025_ide(tmp_path: Path) -> None:
    """The arbigent runner says `resources/list_changed` after every run; the IDE hears it from the gateway."""
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            changed.set()

    config = arbigent_config(tmp_path)
    async with ide_client(
        config, env_for(tmp_path), tmp_path / "stderr.log", "legacy", message_handler=on_message
    ) as client:
        with anyio.fail_after(60):
            await client.call_tool("orchestrate_task", {"query": "run the login tests"})
            await changed.wait()


async def test_a_backends_resource_list_change_reaches_a_2026_ide_that_listens(tmp_path: Path) -> None:
    config = arbigent_config(tmp_path)
    async with ide_client(config, env_for(tmp_path), tmp_path / "stderr.log", "auto") as client:
        async with client.listen(resources_list_changed=True) as subscription:
            with anyio.fail_after(60):
                await client.call_tool("orchestrate_task", {"query": "run the login tests"})
                event = await anext(subscription)
    assert isinstance(event, ResourcesListChanged)


async def test_over_http_a_2025_ide_reads_a_failing_runs_report_and_hears_the_list_change(tmp_path: Path) -> None:
    port = free_port()
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            changed.set()

    env = os.environ | env_for(tmp_path, AGENTIFY_HTTP_TOKEN="test-token-123456")
    command = [
        str(AGENTIFY),
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--config",
        str(arbigent_config(tmp_path)),
    ]
    with server_process(command, tmp_path / "stderr.log", env):
        await wait_accepting(port, 60)
        client = create_mcp_http_client(headers={"Authorization": "Bearer test-token-123456"})
        async with client, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (r, w):
            async with ClientSession(r, w, message_handler=on_message) as session:
                with anyio.fail_after(90):
                    await session.initialize()
                    result = await session.call_tool("orchestrate_task", {"query": "run the login tests"})
                    [report] = [
                        str(b.uri)
                        for b in result.content
                        if isinstance(b, types.ResourceLink) and str(b.uri).endswith(".html")
                    ]
                    page = await session.read_resource(report)
                    await changed.wait()
    [html] = page.contents
    assert isinstance(html, types.TextResourceContents) and "logout" in html.text
