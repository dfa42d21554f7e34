"""A stdio backend that runs as each person with their own secret (`${person:NAME}` in its env; DESIGN.md, "Each
person's own identity upstream"): the gateway sends each person to its page (URL-mode elicitation, both eras,
never a form elicitation), keeps what they give in the vault, and runs each person's calls on processes of their
own with it; removing a person drops their secret and stops their process.

The gateway is a subprocess with a tokens file; the clients are the SDK's; the backend is tests/fakes/mcp_backend.py,
whose `env_digest` answers with the sha256 of a variable (never the value) and its pid. The "browser" is the test
following the URL with an HTTP client of its own (one per person, with its own cookies)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from tests.conftest import (
    AGENTIFY,
    error_code,
    fake_backend,
    gateway_env,
    pid_alive,
    text_of,
    wait_until,
    write_config,
)
from tests.integration.ide_client import LOGGING, MODES, ide_client
from tests.integration.people_room import assert_nobody_lost_their_read, bob_needs_alices_room
from tests.integration.team import HttpGateway, add_token, http_client, http_gateway, token_command
from tests.integration.test_backend_logs import Logs

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

VAULT_KEY = "vault-key-for-tests-0123456789abcdef0123456789"
SECRETS = {"alice": "ghp_alice-own-secret-4711-never-shown", "bob": "ghp_bob-own-secret-0815-never-shown"}


@dataclass
class Person:
    """A person at an IDE: they open the page they are sent to, give their secret there, then accept."""

    secret: str
    asked: list[types.ElicitRequestParams] = field(default_factory=list)
    pages: list[tuple[int, str]] = field(default_factory=list)

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        assert isinstance(params, types.ElicitRequestURLParams), params
        async with httpx2.AsyncClient(timeout=30) as browser:
            page = await browser.get(params.url)
            self.pages.append((page.status_code, page.text))
            kept = await browser.post(params.url, data={"PAT": self.secret})
            self.pages.append((kept.status_code, kept.text))
        return types.ElicitResult(action="accept")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@asynccontextmanager
async def team(tmp_path: Path, *flags: str, **extra: Any) -> AsyncIterator[tuple[HttpGateway, dict[str, str], Path]]:
    """The gateway with the backend `pat` (the fake one with `flags`, and `extra` in its entry) run as each person."""
    backend = fake_backend("pat", *flags, env={"PAT": "${person:PAT}"}, **extra)
    server = {"auth": {"type": "tokens", "file": "tokens.json"}}
    config = write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)
    tokens = {name: await add_token(tmp_path / "tokens.json", name) for name in ("alice", "bob", "carol")}
    async with http_gateway(config, tmp_path / "gateway.log", {"AGENTIFY_VAULT_KEY": VAULT_KEY}) as gateway:
        yield gateway, tokens, config


async def env_digest(client: Any) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": "pat__env_digest", "arguments": {"name": "PAT"}})
    assert isinstance(result, types.CallToolResult), result
    return result


async def digest_as(gateway: HttpGateway, token: str, mode: str, person: Person) -> tuple[str, int]:
    async with http_client(gateway.url, token, mode, elicitation_callback=person.elicit) as client:
        result = await env_digest(client)
    assert not result.is_error, text_of(result)
    seen, pid = text_of(result).split()
    return seen, int(pid)


def everything_written(tmp_path: Path) -> bytes:
    return b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file() and not path.is_symlink())


@pytest.mark.parametrize("mode", MODES)
async def test_each_person_runs_the_backend_with_their_own_secret_and_a_third_gets_the_page_not_theirs(
    tmp_path: Path, mode: str
) -> None:
    alice, bob = Person(SECRETS["alice"]), Person(SECRETS["bob"])
    with anyio.fail_after(150):
        async with team(tmp_path) as (gateway, tokens, _):
            alices, alice_pid = await digest_as(gateway, tokens["alice"], mode, alice)
            bobs, bob_pid = await digest_as(gateway, tokens["bob"], mode, bob)
            again, again_pid = await digest_as(gateway, tokens["alice"], mode, alice)
            logs = Logs()  # the backend logs alice's secret: what reaches her is masked
            async with http_client(gateway.url, tokens["alice"], mode + LOGGING, logging_callback=logs.heard) as client:
                echo = {"count": 1, "level": "error", "message": "using ", "env": "PAT"}
                await client.call_tool("call_tool", {"name": "pat__log", "arguments": echo})
                await logs.until("using")
            async with http_client(gateway.url, tokens["carol"], mode) as client:  # her client opens no URLs
                carols = await env_digest(client)
            log = gateway.log()
    assert alices == digest(SECRETS["alice"]) and bobs == digest(SECRETS["bob"])
    assert alice_pid != bob_pid and (again, again_pid) == (alices, alice_pid)  # asked once, her own process kept
    assert len(alice.asked) == 1 and len(bob.asked) == 1
    assert all(isinstance(p, types.ElicitRequestURLParams) and "/oauth/start/" in p.url for p in alice.asked)
    # agentify's own question, in its own words: not relayed as the backend's ("From backend pat (not agentify)")
    assert alice.asked[0].message == "pat runs as you with your own PAT: open the page and give it there.", alice.asked
    assert [status for status, _ in alice.pages] == [200, 200] and 'type="password"' in alice.pages[0][1]
    assert "runs as alice" in alice.pages[0][1] and "If you are not alice, close this page" in alice.pages[0][1]
    assert [entry.data for entry in logs] == ["using [REDACTED]"]
    assert error_code(carols) == "needs_auth", carols
    assert "/oauth/start/" in text_of(carols) and digest(SECRETS["alice"]) not in text_of(carols)
    written = everything_written(tmp_path)  # the gateway's log, the vault, the tokens file, the caches
    assert all(secret.encode() not in written for secret in SECRETS.values())
    assert all(secret not in log for secret in SECRETS.values())


async def test_a_page_of_secrets_is_answered_once_and_only_from_the_browser_that_opened_it(tmp_path: Path) -> None:
    async with team(tmp_path) as (gateway, tokens, _):
        async with http_client(gateway.url, tokens["alice"], "legacy") as client:
            asked = await env_digest(client)
        url = next(word for word in text_of(asked).split() if word.startswith("http"))
        async with httpx2.AsyncClient(timeout=30) as browser, httpx2.AsyncClient(timeout=30) as stranger:
            opened = await browser.get(url)
            reopened = await stranger.get(url)
            foreign = await stranger.post(url, data={"PAT": "mallory"})
            empty = await browser.post(url, data={"PAT": ""})
            kept = await browser.post(url, data={"PAT": SECRETS["alice"]})
            twice = await browser.post(url, data={"PAT": "later"})
        person = Person(SECRETS["alice"])
        seen, _ = await digest_as(gateway, tokens["alice"], "legacy", person)
    assert error_code(asked) == "needs_auth"
    statuses = [a.status_code for a in (opened, reopened, foreign, empty, kept, twice)]
    assert statuses == [200, 410, 403, 400, 200, 410], statuses
    assert seen == digest(SECRETS["alice"]) and person.asked == []


async def test_removing_a_persons_token_or_forgetting_them_stops_their_process_and_asks_them_again(
    tmp_path: Path,
) -> None:
    alice, bob = Person(SECRETS["alice"]), Person(SECRETS["bob"])
    with anyio.fail_after(200):
        async with team(tmp_path) as (gateway, tokens, config):
            _, alice_pid = await digest_as(gateway, tokens["alice"], "legacy", alice)
            _, bob_pid = await digest_as(gateway, tokens["bob"], "auto", bob)
            done = await token_command("remove", "bob", "--file", str(tmp_path / "tokens.json"))
            assert done.returncode == 0, done.stderr
            await digest_as(gateway, tokens["alice"], "legacy", alice)  # the next request reloads the tokens file
            await wait_until(lambda: not pid_alive(bob_pid), 20)
            assert pid_alive(alice_pid)
            env = os.environ | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")}
            with anyio.fail_after(60):
                forgot = await anyio.run_process(
                    [str(AGENTIFY), "vault", "forget", "alice", "--config", str(config)], check=False, env=env
                )
            assert forgot.returncode == 0, forgot.stderr
            await wait_until(lambda: not pid_alive(alice_pid), 20)
            seen, new_pid = await digest_as(gateway, tokens["alice"], "auto", alice)
    assert len(bob.asked) == 1
    assert len(alice.asked) == 2 and seen == digest(SECRETS["alice"]) and new_pid != alice_pid


@pytest.mark.parametrize("mode", MODES)
async def test_over_stdio_the_one_person_gives_their_secret_on_the_loopback_page(tmp_path: Path, mode: str) -> None:
    """A gateway an IDE starts over stdio serves the page on 127.0.0.1, as it does for perPrincipal OAuth."""
    config = write_config(
        tmp_path, [fake_backend("pat", env={"PAT": "${person:PAT}"})], planner={"provider": "offline"}
    )
    env = gateway_env(None, AGENTIFY_CACHE_DIR=str(tmp_path / "cache"), AGENTIFY_VAULT_KEY=VAULT_KEY)
    me = Person(SECRETS["alice"])
    with anyio.fail_after(120):
        async with ide_client(config, env, tmp_path / "e.log", mode, elicitation_callback=me.elicit) as client:
            first = await env_digest(client)
            again = await env_digest(client)
    assert text_of(first).split()[0] == digest(SECRETS["alice"]), text_of(first)
    assert text_of(again) == text_of(first) and len(me.asked) == 1
    assert all(p.url.startswith("http://127.0.0.1:") for p in me.asked)  # type: ignore[union-attr]
    assert SECRETS["alice"].encode() not in everything_written(tmp_path)


@pytest.mark.parametrize("mode", MODES)
async def test_a_person_whose_read_is_in_flight_keeps_their_process_when_another_needs_room(
    tmp_path: Path, mode: str
) -> None:
    """`maxPeople: 1`: bob needs alice's room while her slow read runs. Her read finishes; bob is told to try again,
    and gets his read once hers is done; then hers works again."""
    marker = tmp_path / "backend.log"
    alice, bob = Person(SECRETS["alice"]), Person(SECRETS["bob"])
    with anyio.fail_after(150):
        async with team(tmp_path, "--marker", str(marker), "--resources", "demo://pat", maxPeople=1) as (
            gateway,
            tokens,
            _,
        ):
            await digest_as(gateway, tokens["alice"], mode, alice)  # each gives their secret
            await digest_as(gateway, tokens["bob"], mode, bob)  # alice's process made room for bob's
            async with (
                http_client(gateway.url, tokens["alice"], mode) as alices,
                http_client(gateway.url, tokens["bob"], mode) as bobs,
            ):
                outcome = await bob_needs_alices_room(alices, bobs, "demo://pat/slow/3", "demo://pat/doc", marker)
    assert "cancelled read" not in marker.read_text()
    assert_nobody_lost_their_read(outcome, "demo://pat reads demo://pat/slow/3", "demo://pat reads demo://pat/doc")
