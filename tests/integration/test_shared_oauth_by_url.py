"""A remote OAuth backend with one shared identity, authorized from the IDE: on a one-person gateway the call that
meets the server's request for authorization (at first, and for a scope step-up) asks the person to open a URL,
in both eras, and the tokens land where `agentify auth` keeps them; nobody runs `agentify auth`. On a team
gateway a named person may not choose the identity everyone's calls carry: they are told who can.

The backend is tests/fakes/oauth_backend.py --people (see test_identity_upstream.py): whoami() answers with the
identity its token carries, admin_action() needs the scope "admin" (a 403 step-up).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.conftest import error_code, gateway_env, text_of, write_config
from tests.integration.ide_client import MODES, ide_client
from tests.integration.team import add_token, http_client, http_gateway
from tests.integration.test_identity_upstream import Browser, Person, people_backend, whoami
from tests.servers import wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("mode", MODES)
async def test_the_person_at_the_ide_authorizes_and_steps_up_a_shared_backend_by_url(tmp_path: Path, mode: str) -> None:
    with people_backend(tmp_path) as (url, events):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = write_config(tmp_path, [{"id": "gh", "url": url, "auth": {"type": "oauth"}}])
        env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), AGENTIFY_CONFIG_DIR=str(tmp_path / "cfg"))
        carol = Person(Browser("carol"))
        log = tmp_path / "gateway.log"
        options = {"elicitation_callback": carol.elicit, "message_handler": carol.heard}
        async with ide_client(config, env, log, mode, **options) as client:
            first = await whoami(client)  # nobody has authorized: the server refuses even to list its tools
            admin = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
            after = await whoami(client)
            listed = await client.call_tool("list_backends", {})
    assert text_of(first) == "you are carol; scopes: none", first
    assert text_of(admin) == "admin action done", admin
    assert text_of(after) == "you are carol; scopes: admin read", after
    assert (listed.structured_content or {})["backends"][0]["state"] == "ready", listed
    assert len(carol.asked) == 2, carol.asked  # the authorization, then the step-up: each by URL, once
    for asked in carol.asked:
        assert isinstance(asked, types.ElicitRequestURLParams), asked
        assert asked.url.startswith("http://127.0.0.1:") and "/oauth/start/" in asked.url, asked.url
    # agentify's own questions, in its own words: not relayed as the backend's ("From backend gh (not agentify)")
    assert carol.asked[0].message == "Authorize agentify to use gh for this gateway: open the page and sign in."
    assert carol.asked[1].message.startswith("Authorize agentify to use gh for this gateway with the scope "), (
        carol.asked
    )
    assert "admin" in carol.asked[1].message and "scope" in carol.asked[1].message, carol.asked[1].message
    if mode == "legacy":
        assert carol.completed == [asked.elicitation_id for asked in carol.asked]  # type: ignore[union-attr]
    # The tokens are the gateway's one shared identity, where `agentify auth` keeps them.
    (token_file,) = (tmp_path / "cfg" / "oauth").glob("gh-*.json")
    assert json.loads(token_file.read_text())["tokens"]["scope"].split() == ["read", "admin"]
    assert events.read_text().splitlines().count("authorized carol") == 2
    text = log.read_text()
    assert "Traceback" not in text and "ERROR" not in text, text
    assert "WARNING" not in text and "asks the person, from their IDE, to open a page" in text, text  # expected: INFO


@pytest.mark.parametrize("mode", MODES)
async def test_a_named_person_of_a_team_is_told_who_may_authorize_a_shared_backend(tmp_path: Path, mode: str) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        backend = {"id": "gh", "url": url, "auth": {"type": "oauth"}}
        server = {"auth": {"type": "tokens", "file": "tokens.json"}}
        config = write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)
        token = await add_token(tmp_path / "tokens.json", "alice")
        alice = Person(Browser("alice"))
        async with http_gateway(config, tmp_path / "gateway.log", {}) as gateway:
            async with http_client(gateway.url, token, mode, elicitation_callback=alice.elicit) as client:
                result = await whoami(client)
    assert error_code(result) == "backend_unavailable", result
    assert "ask whoever runs the gateway" in text_of(result) and "agentify auth gh" in text_of(result), result
    assert "perPrincipal" in text_of(result), result
    assert alice.asked == [] and alice.browser.pages == []


@pytest.mark.parametrize("mode", MODES)
async def test_over_http_the_holder_of_the_one_shared_token_authorizes_a_shared_backend(
    tmp_path: Path, mode: str
) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = write_config(
            tmp_path, [{"id": "gh", "url": url, "auth": {"type": "oauth"}}], planner={"provider": "offline"}
        )
        token = "one-shared-token-for-this-test-0123456789"
        env = {"AGENTIFY_HTTP_TOKEN": token, "AGENTIFY_CONFIG_DIR": str(tmp_path / "cfg")}
        dave = Person(Browser("dave"))
        async with http_gateway(config, tmp_path / "gateway.log", env) as gateway:
            async with http_client(gateway.url, token, mode, elicitation_callback=dave.elicit) as client:
                result = await whoami(client)
    assert text_of(result) == "you are dave; scopes: none", result
    (asked,) = dave.asked
    assert isinstance(asked, types.ElicitRequestURLParams) and asked.url.startswith(gateway.at("/oauth/start/"))
    assert list((tmp_path / "cfg" / "oauth").glob("gh-*.json")), "the tokens are the gateway's shared ones"


async def test_a_declined_step_up_leaves_a_shared_backend_usable_and_shows_the_scope(tmp_path: Path) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = write_config(tmp_path, [{"id": "gh", "url": url, "auth": {"type": "oauth"}}])
        env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), AGENTIFY_CONFIG_DIR=str(tmp_path / "cfg"))
        erin = Person(Browser("erin"))

        async def once_then_decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            if erin.asked:
                erin.asked.append(params)
                return types.ElicitResult(action="decline")
            return await erin.elicit(context, params)

        log = tmp_path / "gateway.log"
        async with ide_client(config, env, log, "legacy", elicitation_callback=once_then_decline) as client:
            await whoami(client)
            admin = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
            still = await whoami(client)
            listed = await client.call_tool("list_backends", {})
    assert error_code(admin) == "denied" and "declined" in text_of(admin), admin
    assert text_of(still) == "you are erin; scopes: none", still
    (backend,) = (listed.structured_content or {})["backends"]
    assert backend["state"] == "ready" and "read admin" in backend["lastError"], backend
    assert "step-up: admin_action asks for the scope read admin" in log.read_text()
    assert "Traceback" not in log.read_text()


async def test_metadata_naming_another_resource_says_so_without_asking_the_person(tmp_path: Path) -> None:
    with people_backend(tmp_path, "--wrong-resource") as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = write_config(tmp_path, [{"id": "gh", "url": url, "auth": {"type": "oauth"}}])
        env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), AGENTIFY_CONFIG_DIR=str(tmp_path / "cfg"))
        frank = Person(Browser("frank"))
        async with ide_client(config, env, tmp_path / "gateway.log", "legacy", elicitation_callback=frank.elicit) as c:
            result = await whoami(c)
    assert error_code(result) == "backend_unavailable", result
    assert "names another resource" in text_of(result) and "cannot fix this" in text_of(result), text_of(result)
    assert frank.asked == []


async def test_a_named_person_of_a_team_meeting_a_step_up_is_told_who_may_widen_the_scope(tmp_path: Path) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        backend = {"id": "gh", "url": url, "auth": {"type": "oauth"}}
        shared = {"AGENTIFY_CONFIG_DIR": str(tmp_path / "cfg")}
        # Whoever runs the gateway authorized it as themselves, from their own IDE (over stdio).
        owner = Person(Browser("owner"))
        (tmp_path / "solo").mkdir()
        solo = write_config(tmp_path / "solo", [backend])
        env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "solo-cache"), **shared)
        async with ide_client(solo, env, tmp_path / "solo.log", "legacy", elicitation_callback=owner.elicit) as ide:
            assert text_of(await whoami(ide)).startswith("you are owner")
        server = {"auth": {"type": "tokens", "file": "tokens.json"}}
        config = write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)
        token = await add_token(tmp_path / "tokens.json", "alice")
        alice = Person(Browser("alice"))
        async with http_gateway(config, tmp_path / "gateway.log", shared) as gateway:
            async with http_client(gateway.url, token, "legacy", elicitation_callback=alice.elicit) as client:
                mine = await whoami(client)
                admin = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
    assert text_of(mine).startswith("you are owner"), mine  # one identity, shared by everyone on the gateway
    assert error_code(admin) == "backend_unavailable", admin
    assert "ask whoever runs the gateway" in text_of(admin) and "more scope" in text_of(admin), admin
    assert alice.asked == []
