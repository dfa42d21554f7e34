"""OAuth end to end: needs_auth, `agentify auth` with a loopback redirect, refresh on 401, then needs_auth again.

The backend is its own authorization server, built on the SDK's `mcp.server.auth`; the browser
step is an HTTP client following the redirects from the printed URL to agentify's loopback."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

import anyio
import httpx2
import pytest

from tests.conftest import AGENTIFY, REPO, error_code, gateway, gateway_env, text_of, wait_until
from tests.fakes.model_server import ModelServer, Reply
from tests.servers import free_port, server_process, wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

OAUTH_BACKEND = REPO / "tests/fakes/oauth_backend.py"


async def call(session: Any, model: ModelServer, tool: str, arguments: dict[str, Any]) -> Any:
    model.push(Reply.tool_call(tool, arguments))
    return await session.call_tool("orchestrate_task", {"query": f"use {tool}"})


async def state_of(session: Any, backend_id: str) -> dict[str, Any]:
    listing = await session.call_tool("list_backends", {})
    return next(b for b in (listing.structured_content or {})["backends"] if b["id"] == backend_id)


async def authorization_url(stderr: Any) -> tuple[str, bytes]:
    """The URL `agentify auth` prints for the browser (log lines may come around it), and what it read."""
    seen = b""
    with anyio.fail_after(90):  # the command's start-up and the server's discovery, on a loaded machine
        while not re.search(rb"\nhttp://[^\n]*/authorize\?[^\n]*\n", seen):
            seen += await stderr.receive()
    url = next(line for line in seen.decode().splitlines() if line.startswith("http://") and "/authorize?" in line)
    return url, seen


async def authorize(config: Path, env: dict[str, str], log: Path) -> str:
    """`agentify auth secure`, with the browser step done by following the printed URL's redirects."""
    command = [str(AGENTIFY), "auth", "secure", "--config", str(config)]
    async with await anyio.open_process(command, env=env | {"BROWSER": "true"}) as process:
        assert process.stderr is not None and process.stdout is not None
        url, seen = await authorization_url(process.stderr)
        redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as browser:
            # Another page in the browser calls the loopback callback first: it must not abort the login.
            forged = await browser.get(redirect, params={"error": "<b>denied</b>", "state": "forged"})
            assert forged.status_code == 400 and "<b>" not in forged.text
            page = await browser.get(url)
        assert page.status_code == 200 and "authorized" in page.text
        with anyio.fail_after(30):
            await process.wait()
        out = (await process.stdout.receive()).decode() if process.returncode == 0 else ""
        rest = b""
        with anyio.move_on_after(1):
            async for chunk in process.stderr:
                rest += chunk
        await anyio.Path(log).write_bytes(seen + rest)
        assert process.returncode == 0, (seen + rest).decode()
    return out


async def test_oauth_login_refresh_and_reauthorization(tmp_path: Path, model: ModelServer) -> None:
    port = free_port()
    events = tmp_path / "oauth-events.log"
    argv = [sys.executable, str(OAUTH_BACKEND), "--port", str(port), "--log", str(events)]
    config = tmp_path / "agentify.json"
    entry = {"id": "secure", "url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}
    config.write_text(json.dumps({"backends": [entry]}))
    env = gateway_env(model, AGENTIFY_CONFIG_DIR=str(tmp_path / "config"))
    stderr = tmp_path / "stderr.log"
    with server_process(argv, tmp_path / "server.log"):
        await wait_accepting(port)
        async with gateway(config, env, stderr) as session:
            before = await state_of(session, "secure")
            while before["state"] in ("starting", "stopped"):
                before = await state_of(session, "secure")
            assert before["state"] == "needs_auth" and "agentify auth secure" in before["lastError"]

            auth_env = env | {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache")}
            printed = await authorize(config, auth_env, tmp_path / "auth.log")
            assert "secure is authorized (4 tools)" in printed
            (token_file,) = (tmp_path / "config" / "oauth").glob("secure-*.json")
            assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
            tokens = json.loads(token_file.read_text())["tokens"]

            # The running gateway picks the new tokens up on the next call.
            assert text_of(await call(session, model, "secure__echo", {"text": "signed in"})) == "echo: signed in"
            listed = await state_of(session, "secure")
            assert listed["state"] == "ready" and "echo" in listed["tools"]
            # A server that echoes the token back shows it to nobody.
            echoed = text_of(await call(session, model, "secure__show_credentials", {}))
            assert echoed == "scheme Bearer; credential [REDACTED]", echoed

            # The server forgets the access token: a 401 mid-session refreshes it, and the call goes through.
            assert "revoked" in text_of(await call(session, model, "secure__forget_access", {}))
            again = await call(session, model, "secure__echo", {"text": "refreshed"})
            assert text_of(again) == "echo: refreshed", text_of(again)
            assert "token refresh" in events.read_text().splitlines()
            # The refreshed token, learnt while serving, is masked too.
            refreshed = json.loads(token_file.read_text())["tokens"]
            assert refreshed["access_token"] != tokens["access_token"]
            echoed = text_of(await call(session, model, "secure__show_credentials", {}))
            assert echoed == "scheme Bearer; credential [REDACTED]", echoed

            # It forgets the refresh token too: the backend needs a new authorization, which a client that cannot
            # open a URL for its user is given to open (tests/integration/test_shared_oauth_by_url.py opens it).
            assert "revoked" in text_of(await call(session, model, "secure__forget_all", {}))
            lost = await call(session, model, "secure__echo", {"text": "gone"})
            assert error_code(lost) == "needs_auth" and "agentify auth secure" in text_of(lost), text_of(lost)
            assert "/oauth/start/" in text_of(lost), text_of(lost)
            assert (await state_of(session, "secure"))["state"] == "needs_auth"
    for secret in (tokens["access_token"], tokens["refresh_token"]):
        assert secret not in stderr.read_text() and secret not in (tmp_path / "auth.log").read_text()


def test_auth_names_the_oauth_backends_when_given_another(tmp_path: Path) -> None:
    config = tmp_path / "agentify.json"
    config.write_text(json.dumps({"backends": [{"id": "local", "command": "true"}]}))
    done = subprocess.run([str(AGENTIFY), "auth", "local", "--config", str(config)], capture_output=True, text=True)
    assert done.returncode == 2 and "not a backend with auth.type oauth" in done.stderr and "none" in done.stderr


async def test_auth_never_shows_the_client_secret_that_a_hostile_server_quotes_back(tmp_path: Path) -> None:
    """The server's error quotes the configured clientSecret JSON-escaped; the SDK logs it (stdlib logging) and
    agentify reports it: neither may show it, in any of its forms."""
    secret = 'cs-"quoted"\\back/slash-4711-zz'
    port = free_port()
    argv = [sys.executable, str(OAUTH_BACKEND), "--port", str(port), "--echo-client-secret"]
    config = tmp_path / "agentify.json"
    auth = {"type": "oauth", "clientId": "agentify-app", "clientSecret": secret}
    config.write_text(json.dumps({"backends": [{"id": "secure", "url": f"http://127.0.0.1:{port}/mcp", "auth": auth}]}))
    env = {"AGENTIFY_CONFIG_DIR": str(tmp_path / "config"), "BROWSER": "true"}  # the default log level
    command = [str(AGENTIFY), "auth", "secure", "--config", str(config)]
    with server_process(argv, tmp_path / "server.log", env={"FAKE_CLIENT_SECRET": secret}):
        await wait_accepting(port)
        async with await anyio.open_process(command, env=env) as process:
            assert process.stderr is not None
            url, seen = await authorization_url(process.stderr)
            async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as browser:
                await browser.get(url)
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    seen += chunk
                await process.wait()
    stderr = seen.decode()
    assert process.returncode == 1, stderr
    assert "Token exchange failed" in stderr and "[REDACTED]" in stderr
    for form in (secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret), repr(secret)[1:-1]):
        assert form not in stderr, form
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("answer", "says"),
    [("huge", "answered more than 256 KiB"), ("html", "answered the token request with text/html")],
)
async def test_auth_refuses_a_huge_or_non_json_token_answer_and_stores_nothing(
    tmp_path: Path, answer: str, says: str
) -> None:
    """A hostile token endpoint streams 150 MB of one token (no Content-Length), or answers as text/html."""
    port = free_port()
    events = tmp_path / "oauth-events.log"
    argv = [sys.executable, str(OAUTH_BACKEND), "--port", str(port), "--log", str(events), "--token-answer", answer]
    config = tmp_path / "agentify.json"
    entry = {"id": "secure", "url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}
    config.write_text(json.dumps({"backends": [entry]}))
    env = {"AGENTIFY_CONFIG_DIR": str(tmp_path / "config"), "BROWSER": "true"}
    command = [str(AGENTIFY), "auth", "secure", "--config", str(config)]
    with server_process(argv, tmp_path / "server.log"):
        await wait_accepting(port)
        async with await anyio.open_process(command, env=env) as process:
            assert process.stderr is not None
            url, seen = await authorization_url(process.stderr)
            async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as browser:
                await browser.get(url)
            with anyio.fail_after(60):
                async for chunk in process.stderr:
                    seen += chunk
                await process.wait()
        if answer == "huge":
            await wait_until(lambda: "token answer sent" in (events.read_text() if events.exists() else ""), 30)
    stderr = seen.decode()
    assert process.returncode == 1 and says in stderr and "Traceback" not in stderr, stderr
    (token_file,) = (tmp_path / "config" / "oauth").glob("secure-*.json")
    assert "tokens" not in json.loads(token_file.read_text())  # the registration only
    if answer == "huge":
        (sent,) = [int(line.split()[-1]) for line in events.read_text().splitlines() if "answer sent" in line]
        assert sent < 32 << 20, sent  # it hung up after the limit, and socket buffers, not after 150 MB


async def test_auth_takes_another_port_when_the_remembered_one_is_busy(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "agentify.json"
    entry = {"id": "secure", "url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}
    config.write_text(json.dumps({"backends": [entry]}))
    env = gateway_env(None, AGENTIFY_CONFIG_DIR=str(tmp_path / "config"))
    with server_process([sys.executable, str(OAUTH_BACKEND), "--port", str(port)], tmp_path / "server.log"):
        await wait_accepting(port)
        assert "secure is authorized" in await authorize(config, env, tmp_path / "first.log")
        (token_file,) = (tmp_path / "config" / "oauth").glob("secure-*.json")
        stored = json.loads(token_file.read_text())
        remembered = urlsplit(stored["client"]["redirect_uris"][0]).port
        token_file.write_text(json.dumps({"client": stored["client"]}))  # the tokens are gone: authorize again
        with socket.socket() as squatter:  # another program took the port meanwhile
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", remembered))
            squatter.listen(1)
            printed = await authorize(config, env, tmp_path / "second.log")
    said = (tmp_path / "second.log").read_text()
    assert "secure is authorized" in printed
    assert f"port {remembered}" in said and "is busy" in said and "Traceback" not in said
    now = urlsplit(json.loads(token_file.read_text())["client"]["redirect_uris"][0]).port
    assert now != remembered
