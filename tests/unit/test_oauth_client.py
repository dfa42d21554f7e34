"""agentify's additions to the SDK's OAuth client, against authorization servers whose answers come from a
function (httpx2's MockTransport, a real transport): the step-up scope remembered while serving, a client
metadata document URL as the client id, and the 2025-03-26 layout's metadata on the server's own origin;
and what a call refused for scope tells the user.
The browser is `open_url`, which records the authorization URL and stops the flow there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import MCPError

from agentify.backends.calls import _call_failure
from agentify.backends.connection import Link
from agentify.backends.oauth import TokenFile, provider_for
from agentify.config import BackendConfig, load_sources
from agentify.errors import BackendUnavailable, ConfigError

pytestmark = pytest.mark.anyio

SERVER = "http://mcp.test/mcp"
PRM = "http://mcp.test/.well-known/oauth-protected-resource/mcp"
CIMD = "https://agentify.example/client.json"


class Opened(Exception):
    """The flow reached the browser: the authorization URL it would open."""


async def open_url(url: str) -> None:
    raise Opened(url)


async def no_callback() -> AuthorizationCodeResult:
    raise AssertionError("open_url stops the flow first")


def browser(spec: BackendConfig, store: TokenFile) -> httpx2.Auth:
    """The provider of `agentify auth`, with the browser above."""
    return provider_for(
        spec, store, redirect_uri="http://127.0.0.1:1/callback", open_url=open_url, callback=no_callback
    )


def backend(tmp_path: Path, **oauth: Any) -> BackendConfig:
    path = tmp_path / "agentify.json"
    path.write_text(json.dumps({"backends": [{"id": "remote", "url": SERVER, "auth": {"type": "oauth", **oauth}}]}))
    return load_sources(str(path), {}, {}).resolve().backends[0]


def metadata(issuer: str, **extra: Any) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        **extra,
    }


def server(
    mcp: Callable[[httpx2.Request], httpx2.Response], asm: dict[str, Any], prm: bool, seen: list[str]
) -> httpx2.MockTransport:
    """The MCP endpoint answers with `mcp`; `prm`: the resource publishes protected-resource metadata naming
    http://auth.test as its authorization server (else the 2025-03-26 layout: metadata at the root)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        seen.append(f"{request.method} {url}")
        if url == SERVER:
            return mcp(request)
        if prm and url == PRM:
            return httpx2.Response(200, json={"resource": SERVER, "authorization_servers": ["http://auth.test"]})
        if url in (
            "http://auth.test/.well-known/oauth-authorization-server",
            "http://mcp.test/.well-known/oauth-authorization-server",
        ):
            return httpx2.Response(200, json=asm)
        if url.endswith("/register"):
            return httpx2.Response(201, json={"client_id": "registered", **json.loads(request.content)})
        return httpx2.Response(404)

    return httpx2.MockTransport(answer)


def challenge(status: int, scope: str) -> Callable[[httpx2.Request], httpx2.Response]:
    error = ', error="insufficient_scope"' if status == 403 else ""
    header = f'Bearer scope="{scope}", resource_metadata="{PRM}"{error}'
    return lambda request: httpx2.Response(status, headers={"WWW-Authenticate": header})


async def post(transport: httpx2.MockTransport, auth: httpx2.Auth) -> int:
    async with httpx2.AsyncClient(transport=transport, auth=auth) as client:
        response = await client.post(SERVER, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    return response.status_code


async def authorization_url(transport: httpx2.MockTransport, auth: httpx2.Auth) -> dict[str, str]:
    with pytest.raises(Opened) as opened:
        await post(transport, auth)
    url = urlsplit(str(opened.value))
    return {"at": f"{url.scheme}://{url.netloc}{url.path}"} | {k: v[0] for k, v in parse_qs(url.query).items()}


async def test_a_step_up_while_serving_is_remembered_and_asked_for_by_the_next_authorization(tmp_path: Path) -> None:
    spec = backend(tmp_path)
    store = TokenFile(spec, tmp_path)
    tokens = {"access_token": "a", "token_type": "Bearer", "refresh_token": "r", "scope": "mcp:basic"}
    store._write({"tokens": tokens, "client": {"client_id": "known", "redirect_uris": ["http://127.0.0.1:1/callback"]}})
    seen: list[str] = []
    step_up = server(challenge(403, "mcp:basic mcp:write"), metadata("http://auth.test"), True, seen)

    # While serving nobody can open the browser: the 403 is that request's answer (the session stays up for
    # what the token allows), and the scope is remembered with what was granted.
    assert await post(step_up, provider_for(spec, store)) == 403
    assert store.wanted_scope() == "mcp:basic mcp:write"
    assert store.missing_scope() == {"mcp:write"}
    assert not store.expire(), "a refresh cannot widen the scope: only a new authorization helps"

    # `agentify auth`: the server's 401 names the basic scope only; the authorization asks for both.
    store._write(store._read() | {"tokens": None})
    login = server(challenge(401, "mcp:basic"), metadata("http://auth.test"), True, seen)
    asked = await authorization_url(login, browser(spec, store))
    assert asked["scope"].split() == ["mcp:basic", "mcp:write"]


async def test_a_client_metadata_document_url_is_the_client_id_where_the_server_supports_them(tmp_path: Path) -> None:
    spec = backend(tmp_path, clientMetadataUrl=CIMD)
    seen: list[str] = []
    supports = server(
        challenge(401, "mcp"), metadata("http://auth.test", client_id_metadata_document_supported=True), True, seen
    )
    asked = await authorization_url(supports, browser(spec, TokenFile(spec, tmp_path / "a")))
    assert asked["client_id"] == CIMD
    assert not [line for line in seen if line.endswith("/register")]

    registers = server(challenge(401, "mcp"), metadata("http://auth.test"), True, seen)
    asked = await authorization_url(registers, browser(spec, TokenFile(spec, tmp_path / "b")))
    assert asked["client_id"] == "registered"
    assert "POST http://auth.test/register" in seen


def test_a_client_metadata_document_url_must_be_https_with_a_path(tmp_path: Path) -> None:
    for wrong in ("http://agentify.example/client.json", "https://agentify.example/"):
        with pytest.raises(ConfigError, match=r"clientMetadataUrl.*not an https:// URL with a path"):
            backend(tmp_path, clientMetadataUrl=wrong)


async def test_legacy_metadata_on_the_servers_own_origin_is_used_and_another_origins_refused(tmp_path: Path) -> None:
    spec = backend(tmp_path)
    seen: list[str] = []
    own = server(challenge(401, "mcp"), metadata("http://mcp.test/oauth"), False, seen)
    asked = await authorization_url(own, browser(spec, TokenFile(spec, tmp_path / "a")))
    assert asked["at"] == "http://mcp.test/oauth/authorize"
    assert "POST http://mcp.test/oauth/register" in seen

    seen.clear()
    foreign = server(challenge(401, "mcp"), metadata("http://elsewhere.test/oauth"), False, seen)
    with pytest.raises(OAuthFlowError, match="issuer mismatch"):
        await post(foreign, browser(spec, TokenFile(spec, tmp_path / "b")))
    assert not [line for line in seen if "register" in line or "authorize" in line]


async def test_a_call_refused_for_scope_says_to_run_agentify_auth(tmp_path: Path) -> None:
    send, receive = anyio.create_memory_object_stream[Any](1)
    with send, receive:
        link = Link(read_stream=receive, write_stream=send, refused_status=403)
        link.gone.set()
        error = await _call_failure(MCPError(types.CONNECTION_CLOSED, "closed"), link, backend(tmp_path), "write", "")
    assert isinstance(error, BackendUnavailable)
    assert "refused the call to write (HTTP 403)" in str(error)
    assert "`agentify auth remote`" in str(error)


class RotatingServer:
    """An MCP endpoint and a token endpoint that rotates refresh tokens (each works once), like most servers.
    `together`: a refresh is answered once that many have arrived (or after a short wait), so refreshes that run at
    once do overlap at the server; `elsewhere`: what happens, instead of answering, to the first refresh (another
    process refreshed with the same token just before)."""

    def __init__(self, together: int = 1, elsewhere: Callable[[], None] | None = None) -> None:
        self.access = {"a0": False}  # access token: still valid
        self.refresh = {"r0"}
        self.refreshes = 0
        self._together = together
        self._arrived = 0
        self._all_arrived = anyio.Event()
        self._elsewhere = elsewhere

    def issue(self) -> dict[str, Any]:
        self.refreshes += 1
        access, refresh = f"a{self.refreshes}", f"r{self.refreshes}"
        self.access[access], self.refresh = True, self.refresh | {refresh}
        return {"access_token": access, "token_type": "Bearer", "refresh_token": refresh, "expires_in": 3600}

    async def answer(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        if url == SERVER:
            bearer = request.headers.get("Authorization", "").partition(" ")[2]
            return httpx2.Response(200) if self.access.get(bearer) else challenge(401, "mcp")(request)
        if url == "http://mcp.test/token":
            self._arrived += 1
            if self._arrived >= self._together:
                self._all_arrived.set()
            with anyio.move_on_after(0.5):
                await self._all_arrived.wait()
            sent = parse_qs(request.content.decode())["refresh_token"][0]
            if self._elsewhere is not None and sent == "r0":
                self._elsewhere()
            if sent not in self.refresh:
                return httpx2.Response(400, json={"error": "invalid_grant"})
            self.refresh.discard(sent)
            return httpx2.Response(200, json=self.issue())
        discovery = server(challenge(401, "mcp"), metadata("http://auth.test"), True, [])
        response: httpx2.Response = discovery.handler(request)  # type: ignore[assignment]
        return response


def expired_tokens(spec: BackendConfig, tmp_path: Path) -> TokenFile:
    store = TokenFile(spec, tmp_path)
    tokens = {"access_token": "a0", "token_type": "Bearer", "refresh_token": "r0"}
    client = {"client_id": "known", "redirect_uris": ["http://127.0.0.1:1/callback"]}
    store._write({"tokens": tokens, "client": client, "expiresAt": 1.0})
    return store


async def test_two_sessions_refreshing_the_same_tokens_refresh_once_and_both_go_on(tmp_path: Path) -> None:
    # The backend's session and the flow of a person who just authorized both find the stored access token expired.
    spec = backend(tmp_path)
    expired_tokens(spec, tmp_path)
    fake = RotatingServer(together=2)
    transport = httpx2.MockTransport(fake.answer)
    statuses: list[int] = []

    async def session() -> None:
        statuses.append(await post(transport, provider_for(spec, TokenFile(spec, tmp_path))))

    async with anyio.create_task_group() as tg:
        tg.start_soon(session)
        tg.start_soon(session)
    # One refresh: the other session waited for it and used the new tokens; nobody is asked to authorize again.
    assert statuses == [200, 200]
    assert fake.refreshes == 1
    assert (await TokenFile(spec, tmp_path).get_tokens()) is not None


async def test_a_refresh_token_rotated_by_another_process_meanwhile_is_read_again(tmp_path: Path) -> None:
    spec = backend(tmp_path)
    store = expired_tokens(spec, tmp_path)
    other = TokenFile(spec, tmp_path)  # another replica, or `agentify auth`, sharing the token file

    def refreshed_elsewhere() -> None:
        fake.refresh.discard("r0")
        data = other._read()
        data["tokens"], data["expiresAt"] = fake.issue(), 9e9
        other._write(data)

    fake = RotatingServer(elsewhere=refreshed_elsewhere)
    assert await post(httpx2.MockTransport(fake.answer), provider_for(spec, store)) == 200
    assert fake.refreshes == 1  # the other process's: this one used what it stored
    assert (await store.get_tokens()) is not None
