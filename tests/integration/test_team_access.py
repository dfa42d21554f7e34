"""server.access on a real gateway: people with their own tokens (groups and scopes from the tokens file, or
from a real issuer's JWTs) see only what the rules and the Cedar policy let them use, in every list of both
protocol eras, and using anything else is refused with `forbidden` before the backend hears of it. A change
of the rules or of the policy file applies without a restart; over stdio the one principal is `local`."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import (
    AGENTIFY,
    API_KEY,
    error_code,
    fake_backend,
    fs_backend,
    gateway,
    gateway_env,
    text_of,
    wait_until,
)
from tests.fakes.jwks_issuer import JwksIssuer
from tests.fakes.model_server import ModelServer, Reply
from tests.integration.ide_client import MODES
from tests.integration.team import HttpGateway, add_token, http_client, http_gateway, initialize
from tests.integration.test_proxy_offers import everything_backend
from tests.servers import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

RULES = [
    {"principals": ["group:qa"], "allow": ["fake", "fs"], "deny": ["fs__move_file"]},
    {"principals": ["scope:files:read"], "allow": ["fs__read_*", "fs__list_*"]},
]
POLICY = """// secrets are nobody's to write or echo, whatever the rules allow
forbid(principal, action == Action::"call", resource == Tool::"fs__write_file")
  when { context.arguments.path like "*secret*" };
forbid(principal, action, resource == Tool::"fake__echo")
  when { context.arguments.text like "*secret*" };
"""


def write_team_config(directory: Path, workspace: Path, rules: list[dict[str, Any]], **server: Any) -> Path:
    path = directory / "agentify.json"
    backends = [fake_backend("fake"), fs_backend(workspace)]
    access = {"rules": rules, "policyFile": "policy.cedar"}
    auth = {"type": "tokens", "file": "tokens.json", "requiredScopes": ["mcp"]}
    body = {
        "backends": backends,
        "expose": ["orchestrate", "search", "tools"],
        "server": {"auth": auth, "access": access} | server,
    }
    path.write_text(json.dumps(body))
    return path


@asynccontextmanager
async def team(
    tmp_path: Path, workspace: Path, env: dict[str, str] | None = None, **server: Any
) -> AsyncIterator[dict[str, Any]]:
    """A gateway with alice (group qa) and bob (scope files:read), and their tokens."""
    (tmp_path / "policy.cedar").write_text(POLICY)
    config = write_team_config(tmp_path, workspace, RULES, **server)
    tokens = tmp_path / "tokens.json"
    people = {
        "alice": await add_token(tokens, "alice", "mcp", groups=("qa",)),
        "bob": await add_token(tokens, "bob", "mcp", "files:read"),
    }
    async with http_gateway(config, tmp_path / "e.log", env) as served:
        yield {"gateway": served, "config": config, "tokens": tokens, **people}


async def seen_by(served: HttpGateway, token: str, mode: str) -> dict[str, Any]:
    """What one person is shown: tools/list, search_tools and list_backends."""
    async with http_client(served.url, token, mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        found = await client.call_tool("search_tools", {"query": "echo the text back", "limit": 50})
        backends = await client.call_tool("list_backends", {})
    return {
        "tools": listed,
        "search": [t["name"] for t in (found.structured_content or {})["tools"]],
        "backends": {b["id"]: b["tools"] for b in (backends.structured_content or {})["backends"]},
        "backends_text": text_of(backends),
    }


async def test_two_people_see_what_their_rules_allow_in_every_list_of_both_eras(
    tmp_path: Path, workspace: Path
) -> None:
    async with team(tmp_path, workspace) as people:
        served = people["gateway"]
        for mode in MODES:
            alice = await seen_by(served, people["alice"], mode)
            bob = await seen_by(served, people["bob"], mode)
            assert {"fake__echo", "fs__write_file", "fs__read_text_file"} <= set(alice["tools"]), mode
            assert "fs__move_file" not in alice["tools"]
            assert {"orchestrate_task", "search_tools", "list_backends"} <= set(bob["tools"])
            assert {"fs__read_text_file", "fs__list_directory"} <= set(bob["tools"]), mode
            assert not {"fake__echo", "fs__write_file", "fs__move_file"} & set(bob["tools"]), bob["tools"]
            assert "fake__echo" in alice["search"] and "fs__move_file" not in alice["search"]
            assert bob["search"] and all(n.startswith(("fs__read_", "fs__list_")) for n in bob["search"]), bob
            assert set(alice["backends"]) == {"fake", "fs"} and "echo" in alice["backends"]["fake"]
            assert "move_file" not in alice["backends"]["fs"] and "write_file" in alice["backends"]["fs"]
            assert list(bob["backends"]) == ["fs"] and "fake" not in bob["backends_text"]
            assert "write_file" not in bob["backends"]["fs"] and "read_text_file" in bob["backends"]["fs"]


async def test_a_forbidden_call_is_refused_before_the_backend_hears_of_it(tmp_path: Path, workspace: Path) -> None:
    secret, moved = workspace / "secret.txt", workspace / "moved.txt"
    async with team(tmp_path, workspace, audit={"file": "audit.jsonl"}) as people:
        served = people["gateway"]
        for mode in MODES:
            async with http_client(served.url, people["bob"], mode) as bob:
                write = {"name": "fs__write_file", "arguments": {"path": str(workspace / "b.txt"), "content": "x"}}
                by_search = await bob.call_tool("call_tool", write)
                directly = await bob.call_tool("fs__write_file", write["arguments"])
                echo = await bob.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "hi"}})
                read = await bob.call_tool(
                    "call_tool", {"name": "fs__read_text_file", "arguments": {"path": str(workspace / "notes.txt")}}
                )
            async with http_client(served.url, people["alice"], mode) as alice:
                move = {"source": str(workspace / "notes.txt"), "destination": str(moved)}
                denied = await alice.call_tool("call_tool", {"name": "fs__move_file", "arguments": move})
                by_policy = await alice.call_tool(
                    "call_tool", {"name": "fs__write_file", "arguments": {"path": str(secret), "content": "x"}}
                )
                told = await alice.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "my secret"}})
                fine = await alice.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "hello"}})
            assert error_code(by_search) == "forbidden", text_of(by_search)
            assert text_of(by_search) == "agentify forbidden: 'bob' may not use fs__write_file (server.access)"
            assert error_code(directly) == "forbidden" and error_code(echo) == "forbidden"
            assert (by_search.meta or {})["agentify/error"]["code"] == "forbidden"
            assert not read.is_error and text_of(read) == "remember the milk\n"
            assert error_code(denied) == "forbidden" and "'alice' may not use fs__move_file" in text_of(denied)
            assert error_code(by_policy) == "forbidden"
            assert "(server.access.policyFile, policy.cedar line 2)" in text_of(by_policy)
            assert error_code(told) == "forbidden" and "policy.cedar line 4" in text_of(told)
            assert not fine.is_error and text_of(fine) == "echo: hello"
            assert not secret.exists() and not moved.exists() and not (workspace / "b.txt").exists()
            assert (workspace / "notes.txt").exists()
    audited = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    refused = {(a["principal"], a["target"]) for a in audited if a["decision"] == "forbidden"}
    assert {("bob", "fs__write_file"), ("alice", "fs__move_file"), ("alice", "fake__echo")} <= refused, audited
    assert all(a["outcome"] == "forbidden" for a in audited if a["decision"] == "forbidden")


async def test_orchestrate_task_plans_over_the_callers_tools_and_refuses_a_forbidden_call(
    tmp_path: Path, workspace: Path, model: ModelServer
) -> None:
    secret = workspace / "secret.txt"
    model.router = lambda body: Reply.tool_call("fs__write_file", {"path": str(secret), "content": "x"})
    env = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": model.base_url}
    async with team(tmp_path, workspace, env) as people:
        for mode in MODES:
            async with http_client(people["gateway"].url, people["alice"], mode) as alice:
                refused = await alice.call_tool("orchestrate_task", {"query": "write x into secret.txt"})
            offered = {t["function"]["name"] for t in model.requests[-1]["tools"]}
            async with http_client(people["gateway"].url, people["bob"], mode) as bob:
                unknown = await bob.call_tool("orchestrate_task", {"query": "write x into secret.txt"})
            offered_to_bob = {t["function"]["name"] for t in model.requests[-1]["tools"]}
            assert error_code(refused) == "forbidden", text_of(refused)
            assert "'alice' may not use fs__write_file (server.access.policyFile, policy.cedar line 2)" in text_of(
                refused
            )
            assert {"fs__write_file", "fake__echo"} <= offered and "fs__move_file" not in offered
            # Bob's planner never saw the tool: its plan names no tool of his.
            assert "fs__write_file" not in offered_to_bob and "fake__echo" not in offered_to_bob
            assert "fs__read_text_file" in offered_to_bob
            assert error_code(unknown) == "invalid_plan", text_of(unknown)
            assert not secret.exists()


async def test_required_scopes_apply_to_the_tokens_file(tmp_path: Path, workspace: Path) -> None:
    async with team(tmp_path, workspace) as people:
        carol = await add_token(people["tokens"], "carol", "files:read")
        answer = await anyio.to_thread.run_sync(initialize, people["gateway"].url, carol)
        alice = await anyio.to_thread.run_sync(initialize, people["gateway"].url, people["alice"])
    assert answer.status == 403 and answer.body["error"] == "insufficient_scope"
    assert "mcp" in answer.body["error_description"]
    assert alice.status == 200


async def test_a_change_of_the_rules_or_the_policy_applies_without_a_restart(tmp_path: Path, workspace: Path) -> None:
    async with team(tmp_path, workspace) as people:
        served = people["gateway"]

        async def bob_sees() -> set[str]:
            async with http_client(served.url, people["bob"], "auto") as bob:
                return {t.name for t in (await bob.list_tools()).tools}

        async def alice_echoes(text: str) -> Any:
            async with http_client(served.url, people["alice"], "legacy") as alice:
                return await alice.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": text}})

        told: list[Any] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification | types.PromptListChangedNotification):
                told.append(message)

        assert "fake__echo" not in await bob_sees()
        write_team_config(tmp_path, workspace, [*RULES, {"principals": ["bob"], "allow": ["fake"]}])
        await wait_until_async(lambda: _contains(bob_sees, "fake__echo"))
        assert error_code(await alice_echoes("a secret")) == "forbidden"
        async with http_client(served.url, people["bob"], "legacy", message_handler=on_message) as listening:
            await listening.list_tools()
            (tmp_path / "policy.cedar").write_text('permit(principal, action, resource == Tool::"fake__echo");')
            await wait_until_async(lambda: _echoed(alice_echoes, "a secret"))
            # Bob's open session hears that what he is shown may have changed.
            await wait_until(lambda: any(isinstance(m, types.PromptListChangedNotification) for m in told))
        (tmp_path / "policy.cedar").write_text("permit(principal, action, resource")  # a half-saved edit
        assert text_of(await alice_echoes("still a secret")) == "echo: still a secret"  # the last good one holds
        await wait_until(lambda: "policy.cedar line 1: unexpected end of input" in served.log())
        (tmp_path / "policy.cedar").write_text(POLICY)
        write_team_config(tmp_path, workspace, [{"principals": ["alice"], "allow": ["fake"]}])
        await wait_until_async(lambda: _lacks(bob_sees, "fs__read_text_file"))
        assert error_code(await alice_echoes("a secret")) == "forbidden"
    assert "Traceback" not in served.log()


async def wait_until_async(check: Any, seconds: float = 30) -> None:
    """Waits until `check()` (a coroutine) is true: the gateway polls the files once a second, and only asking
    again can tell when it read them."""
    with anyio.fail_after(seconds):
        while not await check():  # noqa: ASYNC110
            await anyio.sleep(0.3)


async def _contains(seen: Any, name: str) -> bool:
    return name in await seen()


async def _lacks(seen: Any, name: str) -> bool:
    return name not in await seen()


async def _echoed(echo: Any, text: str) -> bool:
    return text_of(await echo(text)) == f"echo: {text}"


async def test_groups_and_scopes_of_a_jwt_name_who_may_use_what(tmp_path: Path) -> None:
    issuer = JwksIssuer().start()
    try:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        rules = [
            {"principals": ["group:qa"], "allow": ["fake"]},
            {"principals": ["scope:backends:all"], "allow": ["*"]},
        ]
        server = {
            "publicUrl": url,
            "auth": {"type": "jwt", "issuer": issuer.url},
            "access": {"groupsClaim": "roles", "rules": rules},
        }
        config = tmp_path / "agentify.json"
        everything = everything_backend()
        config.write_text(json.dumps({"backends": [fake_backend("fake"), everything], "server": server}))
        async with http_gateway(config, tmp_path / "e.log", port=port) as served:
            by_list = issuer.mint("erin", url, roles=["qa"])
            by_string = issuer.mint("frank", url, roles="dev qa")
            wrong_claim = issuer.mint("gina", url, groups=["qa"])
            admin = issuer.mint("hugo", url, scope="mcp backends:all")
            seen = {}
            for name, token in [("erin", by_list), ("frank", by_string), ("gina", wrong_claim), ("hugo", admin)]:
                async with http_client(served.url, token, "auto") as client:
                    found = await client.call_tool("search_tools", {"query": "echo", "limit": 50})
                    seen[name] = {t["backend"] for t in (found.structured_content or {})["tools"]}
            assert seen == {"erin": {"fake"}, "frank": {"fake"}, "gina": set(), "hugo": {"fake", "everything"}}
            await _offers_follow_access(served, by_list, admin)
    finally:
        issuer.stop()


async def _offers_follow_access(served: HttpGateway, qa: str, admin: str) -> None:
    """Resources, templates and prompts of a backend the principal may not use are neither listed nor read."""
    for mode in MODES:
        async with http_client(served.url, qa, mode) as client:
            resources = await _all_resources(client)
            prompts = (await client.list_prompts(cache_mode="bypass")).prompts
            templates = (await client.list_resource_templates(cache_mode="bypass")).resource_templates
            with pytest.raises(MCPError) as read:
                await client.read_resource("demo://resource/dynamic/text/3", cache_mode="bypass")
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("everything__args-prompt", {"city": "Lisbon"})
        async with http_client(served.url, admin, mode) as client:
            admin_resources = await _all_resources(client)
            got = await client.get_prompt("everything__args-prompt", {"city": "Lisbon"})
        assert resources == [] and prompts == [] and templates == [], mode
        assert read.value.error.message == "'erin' may not read demo://resource/dynamic/text/3 (server.access)"
        assert (read.value.error.data or {})["agentify/error"]["code"] == "forbidden"
        assert "may not use the prompt everything__args-prompt" in prompt.value.error.message
        assert admin_resources and "Lisbon" in got.messages[0].content.text  # type: ignore[union-attr]


async def _all_resources(client: Client) -> list[types.Resource]:
    found: list[types.Resource] = []
    cursor: str | None = None
    with anyio.fail_after(30):
        while True:
            page = await client.list_resources(cursor=cursor, cache_mode="bypass")
            found.extend(page.resources)
            if not (cursor := page.next_cursor):
                return found


async def test_over_stdio_the_one_principal_is_local(tmp_path: Path, workspace: Path) -> None:
    config = tmp_path / "agentify.json"
    rules = [{"principals": ["local"], "allow": ["fs__read_*"]}]
    config.write_text(
        json.dumps({"backends": [fake_backend("fake"), fs_backend(workspace)], "server": {"access": {"rules": rules}}})
    )
    async with gateway(config, gateway_env(None), tmp_path / "e.log") as session:
        found = await session.call_tool("search_tools", {"query": "echo or read", "limit": 50})
        echo = await session.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": "hi"}})
        read = await session.call_tool(
            "call_tool", {"name": "fs__read_text_file", "arguments": {"path": str(workspace / "notes.txt")}}
        )
    names = [t["name"] for t in (found.structured_content or {})["tools"]]
    assert names and all(n.startswith("fs__read_") for n in names), names
    assert error_code(echo) == "forbidden"
    assert text_of(echo) == "agentify forbidden: 'local' may not use fake__echo (server.access)"
    assert text_of(read) == "remember the milk\n"


async def test_a_bad_policy_file_stops_serve_naming_its_line(tmp_path: Path, workspace: Path) -> None:
    (tmp_path / "policy.cedar").write_text(
        'permit(principal, action, resource);\nforbid(principal, action == Action::"write", resource);\n'
    )
    config = write_team_config(tmp_path, workspace, RULES)
    await add_token(tmp_path / "tokens.json", "alice", "mcp")
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(AGENTIFY), "serve", "--transport", "http", "--port", "0", "--config", str(config)],
            check=False,
            env=os.environ | gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache")),
        )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"{tmp_path / 'policy.cedar'} line 2: there is no action 'write'" in stderr
    assert "Traceback" not in stderr
