"""server.auth type `jwt`: agentify as an OAuth 2.1 resource server in front of a real issuer on
127.0.0.1 (tests/fakes/jwks_issuer.py), found by discovery. Every way a token can be wrong is refused
with 401 (403 for a missing scope) and a challenge that points at the RFC 9728 metadata; a good token
is known by its `sub`. One gateway serves the whole module."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jwt
import pytest

from tests.conftest import AGENTIFY, fake_backend, gateway_env, text_of, write_config
from tests.fakes.jwks_issuer import JwksIssuer, new_key, public_pem
from tests.integration.team import Answer, http_client, initialize, request, traces_of
from tests.servers import free_port, stop_gateway_now

pytestmark = [pytest.mark.integration]
SCOPE = "mcp:tools"


@dataclass
class Served:
    issuer: JwksIssuer
    url: str
    directory: Path

    @property
    def metadata(self) -> str:
        return self.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")

    def log(self) -> str:
        return (self.directory / "e.log").read_text(errors="replace")

    def token(self, subject: str = "dana", **claims: object) -> str:
        return self.issuer.mint(subject, self.url, **({"scope": SCOPE} | claims))

    def refused(self, token: str | None) -> Answer:
        """`token`'s answer, right after a good token's (which ends any back-off of this address)."""
        assert initialize(self.url, self.token()).status == 200
        return initialize(self.url, token)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    issuer = JwksIssuer().start()
    directory = tmp_path_factory.mktemp("jwt")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = {"type": "jwt", "issuer": issuer.url, "requiredScopes": [SCOPE]}
    config = write_config(
        directory,
        [fake_backend("fake")],
        planner={"provider": "offline"},
        traceFile="traces.jsonl",
        server={"publicUrl": url, "auth": auth},
    )
    env = os.environ | gateway_env(None, AGENTIFY_CACHE_DIR=str(directory / "cache"))
    command = [str(AGENTIFY), "serve", "--transport", "http", "--port", str(port), "--config", str(config)]
    with (directory / "e.log").open("w") as errlog:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # another process starting: only polling can tell
        assert process.poll() is None and _healthy(url), (directory / "e.log").read_text()[-3000:]
        yield Served(issuer, url, directory)
    finally:
        stop_gateway_now(process)
        issuer.stop()


def _healthy(url: str) -> bool:
    try:
        return request("GET", url.replace("/mcp", "/healthz"), timeout=2).status == 200
    except OSError:
        return False


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def assert_invalid_token(answer: Answer, served: Served, says: str) -> None:
    assert answer.status == 401, answer
    challenge = answer.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{served.metadata}"' in challenge
    assert says in answer.body["error_description"], answer.body


def test_no_token_gets_401_pointing_at_the_metadata(served: Served) -> None:
    answer = served.refused(None)
    assert answer.status == 401
    assert answer.headers["www-authenticate"].startswith("Bearer ")
    assert f'resource_metadata="{served.metadata}"' in answer.headers["www-authenticate"]
    assert "no bearer token was sent" in answer.body["error_description"]


def test_the_metadata_names_the_resource_and_its_issuer_without_a_token(served: Served) -> None:
    answer = request("GET", served.metadata)
    assert answer.status == 200
    assert answer.body["resource"] == served.url
    assert answer.body["authorization_servers"] == [served.issuer.url]  # exactly as configured: no "/" added
    assert answer.body["scopes_supported"] == [SCOPE]


def test_a_token_for_another_audience_is_refused(served: Served) -> None:
    answer = served.refused(served.token(aud="http://127.0.0.1:1/other"))
    assert_invalid_token(answer, served, f"its aud must be {served.url}")


def test_an_expired_token_is_refused(served: Served) -> None:
    answer = served.refused(served.token(exp=int(time.time()) - 3600))
    assert_invalid_token(answer, served, "the token has expired")


def test_a_token_not_valid_yet_is_refused(served: Served) -> None:
    answer = served.refused(served.token(nbf=int(time.time()) + 3600))
    assert_invalid_token(answer, served, "not valid yet")


def test_a_token_of_another_issuer_is_refused(served: Served) -> None:
    answer = served.refused(served.token(iss="http://127.0.0.1:1"))
    assert_invalid_token(answer, served, "from another issuer")


def test_a_bad_signature_is_refused(served: Served) -> None:
    claims = served.issuer.claims("dana", served.url, scope=SCOPE)
    forged = jwt.encode(claims, new_key(), algorithm="RS256", headers={"kid": served.issuer.kid})
    assert_invalid_token(served.refused(forged), served, "signature does not verify")


def test_alg_none_is_refused(served: Served) -> None:
    claims = served.issuer.claims("dana", served.url, scope=SCOPE)
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": served.issuer.kid})
    assert_invalid_token(served.refused(unsigned), served, "algorithm is not its key's")


def test_hs256_with_the_public_key_as_secret_is_refused(served: Served) -> None:
    """The classic key confusion: HMAC signed with the issuer's public key, which anyone can read."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": served.issuer.kid}).encode())
    claims = _b64(json.dumps(served.issuer.claims("mallory", served.url, scope=SCOPE)).encode())
    secret = public_pem(served.issuer.keys[served.issuer.kid])
    signature = _b64(hmac.new(secret, f"{header}.{claims}".encode(), hashlib.sha256).digest())
    assert_invalid_token(served.refused(f"{header}.{claims}.{signature}"), served, "algorithm is not its key's")


def test_a_token_without_the_required_scope_gets_403_insufficient_scope(served: Served) -> None:
    answer = served.refused(served.token(scope="mcp:read"))
    assert answer.status == 403
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert f'scope="{SCOPE}"' in answer.headers["www-authenticate"]
    assert answer.body["error"] == "insufficient_scope"


def test_a_garbled_token_is_refused(served: Served) -> None:
    assert_invalid_token(served.refused("eyJnot.a.jwt"), served, "not a well-formed JWT")


def test_a_rotated_key_is_fetched_for_its_unknown_kid(served: Served) -> None:
    before = served.issuer.fetches
    served.issuer.rotate()
    assert initialize(served.url, served.token("erin")).status == 200
    assert served.issuer.fetches == before + 1


@pytest.mark.anyio
async def test_a_person_with_a_jwt_is_known_by_their_sub_and_the_token_is_never_shown(served: Served) -> None:
    token = served.token("frank@example.com")
    for mode in ("legacy", "auto"):
        async with http_client(served.url, token, mode) as client:
            result = await client.call_tool("call_tool", {"name": "fake__echo", "arguments": {"text": mode}})
        assert text_of(result) == f"echo: {mode}"
    traces = traces_of(served.directory / "traces.jsonl")
    assert {t["input"]["arguments"]["text"]: t["principal"] for t in traces} == {
        "legacy": "frank@example.com",
        "auto": "frank@example.com",
    }
    log = served.log()
    assert "principal=frank@example.com" in log
    assert token not in log and token.split(".")[2] not in log
