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
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from tests.conftest import AGENTIFY, REPO, text_of, write_config
from tests.fakes.jwks_issuer import JwksIssuer
from tests.integration.ide_client import MODES
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


@pytest.mark.parametrize("mode", MODES)
async def test_each_person_reaches_the_backend_with_their_own_exchanged_token(
    tmp_path: Path, issuer: JwksIssuer, mode: str
) -> None:
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
    }
    config = write_config(
        tmp_path,
        [backend],
        planner={"provider": "offline"},
        server={"publicUrl": public, "auth": {"type": "jwt", "issuer": issuer.url}},
    )
    jwts = {person: issuer.mint(person, public) for person in ("alice", "bob")}
    with server_process(argv, tmp_path / "oauth-backend.log"):
        await wait_accepting(backend_port)
        async with http_gateway(config, tmp_path / "gateway.log", port=gateway_port) as gateway:
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
