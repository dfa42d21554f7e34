"""Each person's own identity upstream (`auth.perPrincipal`): a team gateway sends each person, from their IDE, to
authorize a remote backend as themselves (URL-mode elicitation, both eras), keeps their tokens in the vault, and
reaches the backend as that person.

The backend is tests/fakes/oauth_backend.py --people: a real OAuth 2.1 authorization server (dynamic registration,
PKCE) that signs in whoever the browser's `user` cookie names, and a remote MCP server whose `whoami` answers
with the identity its token carries. The "browser" is the test following the URL with an HTTP client of its own
(one per person, each with its own cookies).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from tests.conftest import REPO, contents_text, error_code, gateway_env, text_of, wait_until, write_config
from tests.integration.ide_client import MODES, ide_client
from tests.integration.team import add_token, http_client, http_gateway, token_command
from tests.servers import free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

OAUTH = REPO / "tests/fakes/oauth_backend.py"
VAULT_KEY = "vault-key-for-tests-0123456789abcdef0123456789"
BOARD = "note://board"


@dataclass
class Browser:
    """One person's browser: their cookies (the authorization server signs them in by `user`), the pages seen."""

    user: str
    pages: list[tuple[int, str]] = field(default_factory=list)

    async def open(self, url: str) -> int:
        async with httpx2.AsyncClient(follow_redirects=True, timeout=30, cookies={"user": self.user}) as http:
            answer = await http.get(url)
        self.pages.append((answer.status_code, answer.text))
        return answer.status_code


@dataclass
class Person:
    """A person at an IDE: their browser opens every URL they are asked to open, then they accept."""

    browser: Browser
    asked: list[types.ElicitRequestParams] = field(default_factory=list)
    open_urls: bool = True
    completed: list[str] = field(default_factory=list)
    """The elicitation ids of `notifications/elicitation/complete` (2025-11-25)."""

    async def heard(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if isinstance(params, types.ElicitRequestURLParams) and self.open_urls:
            await self.browser.open(params.url)
        return types.ElicitResult(action="accept")


@contextmanager
def people_backend(tmp_path: Path, *flags: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = tmp_path / "oauth-events.log"
    argv = [sys.executable, str(OAUTH), "--port", str(port), "--people", "--log", str(log), *flags]
    with server_process(argv, tmp_path / "oauth-backend.log"):
        yield f"http://127.0.0.1:{port}/mcp", log


def team_config(tmp_path: Path, url: str, max_people: int | None = None, **server: Any) -> Path:
    backend: dict[str, Any] = {"id": "gh", "url": url, "auth": {"type": "oauth", "perPrincipal": True}}
    if max_people is not None:
        backend["maxPeople"] = max_people
    return write_config(
        tmp_path,
        [backend],
        planner={"provider": "offline"},
        server={"auth": {"type": "tokens", "file": "tokens.json"}} | server,
    )


@asynccontextmanager
async def team(
    tmp_path: Path, *flags: str, max_people: int | None = None, **server: Any
) -> AsyncIterator[tuple[Any, dict[str, str], Path]]:
    """The backend (started with `flags`), a gateway with alice's and bob's tokens, and the vault key."""
    with people_backend(tmp_path, *flags) as (url, events):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = team_config(tmp_path, url, max_people, **server)
        tokens = {name: await add_token(tmp_path / "tokens.json", name) for name in ("alice", "bob")}
        env = {"AGENTIFY_VAULT_KEY": VAULT_KEY}
        async with http_gateway(config, tmp_path / "gateway.log", env) as gateway:
            yield gateway, tokens, events


async def whoami(client: Any) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": "gh__whoami", "arguments": {}})
    assert isinstance(result, types.CallToolResult), result
    return result


@pytest.mark.parametrize("mode", MODES)
async def test_two_people_each_reach_the_backend_as_themselves(tmp_path: Path, mode: str) -> None:
    async with team(tmp_path) as (gateway, tokens, events):
        alice, bob = Person(Browser("alice")), Person(Browser("bob"))
        options = {"elicitation_callback": alice.elicit, "message_handler": alice.heard}
        async with http_client(gateway.url, tokens["alice"], mode, **options) as client:
            first = await whoami(client)
            again = await whoami(client)
        async with http_client(gateway.url, tokens["bob"], mode, elicitation_callback=bob.elicit) as client:
            bobs = await whoami(client)
        log = gateway.log()
    assert text_of(first).startswith("you are alice"), text_of(first)
    assert text_of(again).startswith("you are alice"), text_of(again)
    assert text_of(bobs).startswith("you are bob"), text_of(bobs)
    # Each was asked once, by URL, on the gateway's own start route; the second call needed nothing.
    for person in (alice, bob):
        assert len(person.asked) == 1, person.asked
        (asked,) = person.asked
        assert isinstance(asked, types.ElicitRequestURLParams)
        assert asked.url.startswith(gateway.at("/oauth/start/")), asked.url
        assert person.browser.pages[-1][0] == 200, person.browser.pages
        assert asked.message == "Authorize agentify to use gh as you: open the page and sign in.", asked.message
    if mode == "legacy":  # the call waited for the authorization, then said it was complete
        assert len(alice.completed) == 1 and alice.completed[0] == alice.asked[0].elicitation_id, alice.completed
    assert events.read_text().splitlines().count("authorized alice") == 1
    assert events.read_text().splitlines().count("authorized bob") == 1
    assert "Traceback" not in log
    # The backend saw each person's own upstream token, never the token they reach agentify with.
    seen = [line.removeprefix("saw ") for line in events.read_text().splitlines() if line.startswith("saw ")]
    assert len(seen) >= 4 and all(len(credential) > 20 for credential in seen if credential != "(none)"), seen
    assert not {tokens["alice"], tokens["bob"]} & set(seen), seen


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_open_urls_gets_needs_auth_with_the_url(tmp_path: Path, mode: str) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        async with http_client(gateway.url, tokens["alice"], mode) as client:
            result = await whoami(client)
        assert error_code(result) == "needs_auth", result
        url = next(word for word in text_of(result).split() if word.startswith("http"))
        assert url.startswith(gateway.at("/oauth/start/"))
        browser = Browser("alice")
        assert await browser.open(url) == 200, browser.pages
        async with http_client(gateway.url, tokens["alice"], mode) as client:
            result = await whoami(client)
    assert text_of(result).startswith("you are alice"), result


@pytest.mark.parametrize("mode", MODES)
async def test_someone_who_never_authorized_takes_no_room_from_a_person_who_did(tmp_path: Path, mode: str) -> None:
    """`maxPeople: 1`: bob, who never authorized, reads from the backend. He is told to authorize first, and alice's
    session stays: her list_backends still shows it ready, and her read works."""
    async with team(tmp_path, max_people=1) as (gateway, tokens, _):
        alice = Person(Browser("alice"))
        async with http_client(gateway.url, tokens["alice"], mode, elicitation_callback=alice.elicit) as alices:
            await whoami(alices)
            async with http_client(gateway.url, tokens["bob"], mode) as bobs:
                with pytest.raises(MCPError) as refused:
                    await bobs.read_resource(BOARD)
            listed = await alices.call_tool("list_backends", {})
            read = await alices.read_resource(BOARD)
    assert "call one of its tools first to authorize" in refused.value.error.message, refused.value.error
    assert "- gh: ready" in text_of(listed), text_of(listed)
    assert contents_text(read) == "the board"
    assert len(alice.asked) == 1, alice.asked


async def test_a_start_link_works_once_and_a_foreign_state_is_refused(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        async with http_client(gateway.url, tokens["alice"], "legacy") as client:
            result = await whoami(client)
        url = next(word for word in text_of(result).split() if word.startswith("http"))
        mallory = Browser("mallory")
        assert await mallory.open(gateway.at("/oauth/callback?state=forged&code=x")) == 400
        assert "does not belong" in mallory.pages[-1][1]
        assert await Browser("alice").open(url) == 200
        again = Browser("alice")
        assert await again.open(url) == 410
        assert "used already" in again.pages[-1][1]
        assert await again.open(gateway.at("/oauth/start/unknown-id")) == 404


async def test_the_vault_holds_no_plaintext_token_and_no_token_is_shown_or_logged(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, tokens, events):
        alice = Person(Browser("alice"))
        async with http_client(gateway.url, tokens["alice"], "legacy", elicitation_callback=alice.elicit) as client:
            await whoami(client)
            shown = await client.call_tool("call_tool", {"name": "gh__show_credentials", "arguments": {}})
        log = gateway.log()
    (issued,) = [line for line in events.read_text().splitlines() if line.startswith("issued to alice: ")]
    upstream = issued.removeprefix("issued to alice: ").split()
    assert len(upstream) == 2 and all(len(token) > 20 for token in upstream)
    records = list((tmp_path / "cache" / "vault").iterdir())
    assert len(records) == 1
    raw = records[0].read_bytes()
    assert b"access_token" not in raw and b"alice" not in raw
    for token in upstream:
        assert token.encode() not in raw
        assert token not in log
        assert token not in text_of(shown)
    assert text_of(shown) == "scheme Bearer; credential [REDACTED]", text_of(shown)


@pytest.mark.parametrize("mode", MODES)
async def test_a_step_up_asks_the_person_again_and_the_call_goes_on(tmp_path: Path, mode: str) -> None:
    async with team(tmp_path) as (gateway, tokens, events):
        alice = Person(Browser("alice"))
        async with http_client(gateway.url, tokens["alice"], mode, elicitation_callback=alice.elicit) as client:
            before = await whoami(client)
            admin = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
            after = await whoami(client)
        log = gateway.log()
    assert text_of(before) == "you are alice; scopes: none", text_of(before)
    assert text_of(admin) == "admin action done", admin
    assert text_of(after) == "you are alice; scopes: admin read", text_of(after)
    assert len(alice.asked) == 2, alice.asked
    assert "scope" in alice.asked[1].message and "admin" in alice.asked[1].message
    assert "Traceback" not in log and "OAuth flow error" not in log


async def test_a_declined_step_up_leaves_the_rest_usable_and_list_backends_shows_the_scope(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        alice = Person(Browser("alice"))

        async def once_then_decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            if alice.asked:
                alice.asked.append(params)
                return types.ElicitResult(action="decline")
            return await alice.elicit(context, params)

        async with http_client(gateway.url, tokens["alice"], "legacy", elicitation_callback=once_then_decline) as c:
            await whoami(c)
            admin = await c.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
            still = await whoami(c)
            listed = await c.call_tool("list_backends", {})
        async with http_client(gateway.url, tokens["bob"], "legacy") as client:
            bobs_list = await client.call_tool("list_backends", {})
        log = gateway.log()
    assert error_code(admin) == "denied" and "declined" in text_of(admin), admin
    assert text_of(still) == "you are alice; scopes: none", still
    assert "read admin" in text_of(listed), text_of(listed)
    assert "read admin" not in text_of(bobs_list), text_of(bobs_list)
    assert "step-up: admin_action asks for the scope read admin" in log
    assert "ERROR" not in log and "Traceback" not in log


async def test_a_server_that_never_accepts_the_granted_scope_says_so(tmp_path: Path) -> None:
    async with team(tmp_path, "--never-accept") as (gateway, tokens, _):
        alice = Person(Browser("alice"))
        async with http_client(gateway.url, tokens["alice"], "legacy", elicitation_callback=alice.elicit) as client:
            admin = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
            again = await client.call_tool("call_tool", {"name": "gh__admin_action", "arguments": {}})
    assert error_code(admin) == "backend_unavailable", admin
    assert "cannot fix this" in text_of(admin) and "does not accept the scope" in text_of(admin), text_of(admin)
    assert "cannot fix this" in text_of(again), text_of(again)
    assert len(alice.asked) == 2, alice.asked  # the first authorization and one step-up, never a third


async def test_metadata_naming_another_resource_says_so_without_asking_anyone(tmp_path: Path) -> None:
    async with team(tmp_path, "--wrong-resource") as (gateway, tokens, _):
        alice = Person(Browser("alice"))
        async with http_client(gateway.url, tokens["alice"], "legacy", elicitation_callback=alice.elicit) as client:
            result = await whoami(client)
    assert error_code(result) == "backend_unavailable", result
    assert "names another resource" in text_of(result) and "cannot fix this" in text_of(result), text_of(result)
    assert alice.asked == []


async def test_a_removed_token_drops_that_persons_upstream_tokens_by_the_next_request(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        alice, bob = Person(Browser("alice")), Person(Browser("bob"))
        for name, person in (("alice", alice), ("bob", bob)):
            async with http_client(gateway.url, tokens[name], "legacy", elicitation_callback=person.elicit) as client:
                await whoami(client)
        vault = tmp_path / "cache" / "vault"
        assert len(list(vault.iterdir())) == 2
        # --file without the config: the command itself cannot know the vault, the serving gateway does.
        done = await token_command("remove", "alice", "--file", str(tmp_path / "tokens.json"))
        assert done.returncode == 0, done.stderr
        async with http_client(gateway.url, tokens["bob"], "legacy", elicitation_callback=bob.elicit) as client:
            still = await whoami(client)
        await wait_until(lambda: len(list(vault.iterdir())) == 1, 10)
    assert text_of(still).startswith("you are bob"), still
    assert len(bob.asked) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_over_stdio_the_person_authorizes_through_a_loopback_listener(tmp_path: Path, mode: str) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        backend = {"id": "gh", "url": url, "auth": {"type": "oauth", "perPrincipal": True}}
        config = write_config(tmp_path, [backend], planner={"provider": "offline"})
        env = gateway_env(None, AGENTIFY_VAULT_KEY=VAULT_KEY, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"))
        carol = Person(Browser("carol"))
        async with ide_client(config, env, tmp_path / "e.log", mode, elicitation_callback=carol.elicit) as client:
            first = await whoami(client)
            again = await whoami(client)
    assert text_of(first).startswith("you are carol") and text_of(again).startswith("you are carol"), first
    (asked,) = carol.asked
    assert isinstance(asked, types.ElicitRequestURLParams) and asked.url.startswith("http://127.0.0.1:"), asked
    assert "/oauth/start/" in asked.url


async def test_a_replica_with_a_per_person_backend_is_ready_before_anyone_authorized(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, _, _):
        with httpx2.Client(timeout=30) as http:
            answer = http.get(gateway.at("/readyz"))
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_person_the_access_rules_refuse_gets_forbidden_never_an_authorization_url(
    tmp_path: Path, mode: str
) -> None:
    access = {"rules": [{"principals": ["alice"], "allow": ["gh"]}, {"principals": ["bob"], "deny": ["gh"]}]}
    async with team(tmp_path, access=access) as (gateway, tokens, events):
        alice, bob = Person(Browser("alice")), Person(Browser("bob"))
        async with http_client(gateway.url, tokens["bob"], mode, elicitation_callback=bob.elicit) as client:
            before = await whoami(client)  # nobody has listed gh's tools yet
        async with http_client(gateway.url, tokens["alice"], mode, elicitation_callback=alice.elicit) as client:
            alices = await whoami(client)
        async with http_client(gateway.url, tokens["bob"], mode, elicitation_callback=bob.elicit) as client:
            after = await whoami(client)  # now they are listed, for alice
    for refused in (before, after):
        assert error_code(refused) == "forbidden", refused
        assert "/oauth/start/" not in text_of(refused), text_of(refused)
    assert bob.asked == [] and bob.browser.pages == []
    assert text_of(alices).startswith("you are alice"), alices
    assert "authorized bob" not in events.read_text()


@dataclass
class Heard:
    """What one person's client heard of the board: `resources/updated` and `resources/list_changed`."""

    events: list[str] = field(default_factory=list)

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.events.append(f"updated {message.params.uri}")
        elif isinstance(message, types.ResourceListChangedNotification):
            self.events.append("list changed")

    async def stream(self, subscription: Any) -> None:
        async for event in subscription:
            if isinstance(event, ResourceUpdated):
                self.events.append(f"updated {event.uri}")
            elif isinstance(event, ResourcesListChanged):
                self.events.append("list changed")


@asynccontextmanager
async def hearing(client: Any, mode: str, heard: Heard) -> AsyncIterator[None]:
    """The person's client follows the board: subscribed (2025-11-25) or listening (2026-07-28)."""
    await client.list_resources(cache_mode="bypass")  # through their own session: the gateway learns the URI
    if mode == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(BOARD)
        yield
        return
    async with client.listen(resource_subscriptions=[BOARD], resources_list_changed=True) as subscription:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heard.stream, subscription)
            yield
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", MODES)
async def test_what_a_persons_backend_session_says_changed_reaches_only_that_person(tmp_path: Path, mode: str) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        people = {name: Person(Browser(name)) for name in ("alice", "bob")}
        heard = {name: Heard() for name in people}
        async with AsyncExitStack() as stack:
            clients = {}
            for name, person in people.items():
                options: dict[str, Any] = {"elicitation_callback": person.elicit}
                if mode == "legacy":  # 2026-07-28: what the listen stream carries (its client hears it there too)
                    options["message_handler"] = heard[name].message
                client = await stack.enter_async_context(http_client(gateway.url, tokens[name], mode, **options))
                assert text_of(await whoami(client)).startswith(f"you are {name}")
                clients[name] = client
            for name, client in clients.items():
                await stack.enter_async_context(hearing(client, mode, heard[name]))
            for name, count in (("alice", 2), ("bob", 2), ("alice", 4)):
                touched = await clients[name].call_tool("call_tool", {"name": "gh__touch", "arguments": {}})
                assert text_of(touched) == "touched", touched
                await wait_until(lambda name=name, count=count: len(heard[name].events) >= count, 30)
            await stack.aclose()
    board = [f"updated {BOARD}", "list changed"]
    assert sorted(heard["alice"].events) == sorted(board * 2), heard
    assert sorted(heard["bob"].events) == sorted(board), heard  # never what alice's session said


@pytest.mark.parametrize("mode", MODES)
async def test_what_one_persons_session_listed_is_never_shown_to_another_after_a_restart(
    tmp_path: Path, mode: str
) -> None:
    with people_backend(tmp_path) as (url, _):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        config = team_config(tmp_path, url)
        tokens = {name: await add_token(tmp_path / "tokens.json", name) for name in ("alice", "bob")}
        env = {"AGENTIFY_VAULT_KEY": VAULT_KEY}
        alice = Person(Browser("alice"))
        async with http_gateway(config, tmp_path / "gateway.log", env) as gateway:
            async with http_client(gateway.url, tokens["alice"], mode, elicitation_callback=alice.elicit) as client:
                await whoami(client)
                alices = await client.list_resources(cache_mode="bypass")
        # The next run keeps what alice's session listed in the backend's manifest (the same cache folder).
        async with http_gateway(config, tmp_path / "gateway.log", env) as gateway:
            async with http_client(gateway.url, tokens["bob"], mode) as client:
                bobs = await client.list_resources(cache_mode="bypass")
    assert [str(r.uri) for r in alices.resources] == [BOARD], alices
    assert bobs.resources == [], bobs  # bob has not authorized: nothing of alice's
