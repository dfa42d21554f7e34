"""`"auth": {"type": "exchange"}`: a team gateway with `server.auth` type `jwt` exchanges each person's own JWT at
the backend's authorization server (RFC 8693) for a token meant for the backend, and never passes the JWT on.

A real issuer on 127.0.0.1 (tests/fakes/jwks_issuer.py) signs the people's JWTs; the backend is
tests/fakes/oauth_backend.py --people --exchange-issuer: its token endpoint takes the exchange (with client
authentication) and its `whoami` answers with the subject of the token a request came with; it logs every
credential a request to its MCP endpoint carried.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import AGENTIFY, REPO, text_of, write_config
from tests.fakes.jwks_issuer import JwksIssuer
from tests.integration.ide_client import MODES
from tests.integration.people_room import assert_nobody_lost_their_read, bob_needs_alices_room
from tests.integration.team import http_client, http_gateway
from tests.servers import free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

OAUTH = REPO / "tests/fakes/oauth_backend.py"
CLIENT_SECRET = "exchange-client-secret-0123456789"


@pytest.fixture
def issuer() -> Iterator[JwksIssuer]:
    started = JwksIssuer().start()
    yield started
    started.stop()


async def whoami(client: object) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": "gh__whoami", "arguments": {}})  # type: ignore[attr-defined]
    assert isinstance(result, types.CallToolResult), result
    return result


@dataclass
class Setup:
    """The exchange backend's argv and events log, the gateway's config, port and the people's JWTs."""

    argv: list[str]
    events: Path
    config: Path
    backend_port: int
    gateway_port: int
    jwts: dict[str, str]


def setup(tmp_path: Path, issuer: JwksIssuer, **extra: Any) -> Setup:
    """tests/fakes/oauth_backend.py as `gh`, exchanged for (`extra` added to its entry), and JWTs of alice and bob."""
    backend_port, gateway_port = free_port(), free_port()
    events = tmp_path / "oauth-events.log"
    argv = [
        sys.executable,
        str(OAUTH),
        "--port",
        str(backend_port),
        "--people",
        "--log",
        str(events),
        "--exchange-issuer",
        issuer.url,
        "--exchange-client",
        f"agentify:{CLIENT_SECRET}",
    ]
    public = f"http://127.0.0.1:{gateway_port}/mcp"
    backend = {
        "id": "gh",
        "url": f"http://127.0.0.1:{backend_port}/mcp",
        "auth": {"type": "exchange", "clientId": "agentify", "clientSecret": CLIENT_SECRET},
    } | extra
    config = write_config(
        tmp_path,
        [backend],
        planner={"provider": "offline"},
        server={"publicUrl": public, "auth": {"type": "jwt", "issuer": issuer.url}},
    )
    jwts = {person: issuer.mint(person, public) for person in ("alice", "bob")}
    return Setup(argv, events, config, backend_port, gateway_port, jwts)


@pytest.mark.parametrize("mode", MODES)
async def test_each_person_reaches_the_backend_with_their_own_exchanged_token(
    tmp_path: Path, issuer: JwksIssuer, mode: str
) -> None:
    given = setup(tmp_path, issuer)
    events, jwts = given.events, given.jwts
    with server_process(given.argv, tmp_path / "oauth-backend.log"):
        await wait_accepting(given.backend_port)
        async with http_gateway(given.config, tmp_path / "gateway.log", port=given.gateway_port) as gateway:
            answers = {}
            for person, token in jwts.items():
                async with http_client(gateway.url, token, mode) as client:
                    answers[person] = (await whoami(client), await whoami(client))
            log = gateway.log()
    for person in jwts:
        for answer in answers[person]:
            assert text_of(answer) == f"you are {person}; scopes: read", answer
    seen = events.read_text().splitlines()
    assert seen.count("exchanged for alice") == 1 and seen.count("exchanged for bob") == 1, seen
    credentials = [line.removeprefix("saw ") for line in seen if line.startswith("saw ")]
    assert credentials and "(none)" not in credentials, seen
    for token in jwts.values():
        assert token not in credentials  # the inbound token never reached the backend
        assert token not in log
    assert CLIENT_SECRET not in log


@pytest.mark.parametrize("mode", MODES)
async def test_a_persons_read_in_flight_keeps_their_session_when_another_needs_room(
    tmp_path: Path, issuer: JwksIssuer, mode: str
) -> None:
    """`maxPeople: 1`: bob needs alice's room while her slow read runs. Her read finishes; bob is told to try
    again, and gets his read once hers is done; then hers works again."""
    given = setup(tmp_path, issuer, maxPeople=1)
    with anyio.fail_after(150), server_process(given.argv, tmp_path / "oauth-backend.log"):
        await wait_accepting(given.backend_port)
        async with (
            http_gateway(given.config, tmp_path / "gateway.log", port=given.gateway_port) as gateway,
            http_client(gateway.url, given.jwts["alice"], mode) as alices,
            http_client(gateway.url, given.jwts["bob"], mode) as bobs,
        ):
            await whoami(alices)
            await whoami(bobs)  # alice's session made room for bob's
            outcome = await bob_needs_alices_room(alices, bobs, "note://slow/3", "note://board", given.events)
    assert_nobody_lost_their_read(outcome, "read after 3 s", "the board")


async def test_an_exchange_backend_needs_jwt_principals(tmp_path: Path) -> None:
    backend = {"id": "gh", "url": "http://127.0.0.1:9/mcp", "auth": {"type": "exchange"}}
    config = write_config(tmp_path, [backend], server={"auth": {"type": "tokens", "file": "tokens.json"}})
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [str(AGENTIFY), "serve", "--transport", "http", "--port", "0", "--config", str(config)],
            check=False,
            env=os.environ | {"PYTHONPATH": str(REPO)},
        )
    assert done.returncode == 2, done.stderr.decode()
    assert b'server.auth type "jwt"' in done.stderr and b"Traceback" not in done.stderr
