"""The console under hostile clients: idle and slow sockets, huge bodies, huge results.

Raw sockets on 127.0.0.1 against one real gateway shared by the tests of this module. Every
socket wait is bounded by a socket timeout, and every loop by a count.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TypeVar

import anyio
import pytest

from agentify.console.views import RESULT_CHARS
from agentify.security.bodies import MAX_BODY_BYTES
from agentify.security.connections import HEAD_SECONDS, MAX_CONNECTIONS
from tests.conftest import fs_backend, gateway_env, write_config
from tests.console.conftest import TOKEN, Console, console_gateway, make_workspace
from tests.fakes.model_server import ModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CLOSE_WAIT = HEAD_SECONDS * 4  # the most a test waits for the server to close a socket
_T = TypeVar("_T")


@pytest.fixture(scope="module")
async def console(tmp_path_factory: pytest.TempPathFactory, scripted_model: ModelServer) -> AsyncIterator[Console]:
    root = tmp_path_factory.mktemp("console-resilience")
    workspace = make_workspace(root / "workspace")
    config = write_config(root, [fs_backend(workspace)])
    env = gateway_env(scripted_model, AGENTIFY_DEBUG_TOKEN=TOKEN)
    async with console_gateway(config, env, root / "stderr.log") as running:
        running.workspace = workspace
        yield running


async def blocking(function: Callable[[], _T]) -> _T:
    """Raw socket work runs in a thread, so the MCP session of the fixture keeps being served."""
    return await anyio.to_thread.run_sync(function)


@contextmanager
def raw(port: int, timeout: float = CLOSE_WAIT) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        yield sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the socket within its timeout (everything it sends is drained)."""
    try:
        for _ in range(1000):
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def request(port: int, head: str, body: bytes = b"") -> bytes:
    """One request on a fresh socket; returns the whole response (the server closes, or it times out)."""
    with raw(port) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received and _complete(received):
                    break
        except TimeoutError:
            pass
        return received


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_request(console: Console) -> str:
    return (
        f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n"
    )


# ----- idle and slow connections --------------------------------------------------------------


async def test_idle_connections_cannot_lock_out_a_request_with_the_token(console: Console) -> None:
    with ExitStack() as stack:
        idle = await blocking(lambda: [stack.enter_context(raw(console.port)) for _ in range(MAX_CONNECTIONS * 2)])
        response = await blocking(lambda: request(console.port, status_request(console)))
        assert response.startswith(b"HTTP/1.1 200"), response[:200]
        assert json.loads(response.partition(b"\r\n\r\n")[2])["pid"] > 0
        # The longest-waiting idle sockets made room: they are closed already.
        evicted = await blocking(lambda: sum(closed_by_server(sock) for sock in idle[:MAX_CONNECTIONS]))
    assert evicted == MAX_CONNECTIONS


async def test_a_connection_that_never_sends_a_request_is_closed(console: Console) -> None:
    def idle() -> bool:
        with raw(console.port) as sock:
            return closed_by_server(sock)

    assert await blocking(idle)


async def test_a_request_head_trickled_in_slowly_does_not_keep_its_connection_open(console: Console) -> None:
    def trickle() -> bool:
        with raw(console.port, timeout=HEAD_SECONDS / 10) as sock:
            sock.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n".encode())
            for n in range(int(CLOSE_WAIT * 10)):  # a header line at most every HEAD_SECONDS / 10
                if closed_by_server(sock):
                    return True
                try:
                    sock.sendall(f"X-Slow-{n}: still coming\r\n".encode())
                except (BrokenPipeError, ConnectionResetError):
                    return True
            return False

    assert await blocking(trickle)


async def test_a_kept_alive_connection_is_closed_when_it_idles_after_a_response(console: Console) -> None:
    def served_then_idle() -> tuple[bytes, bool]:
        with raw(console.port) as sock:
            head = status_request(console).replace("Connection: close\r\n", "")
            sock.sendall(head.encode() + b"\r\n")
            response = b""
            while not (b"\r\n\r\n" in response and _complete(response)):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                response += chunk
            sock.sendall(b"GET /api/status HTTP/1.1\r\n")  # the start of a second request, never finished
            return response, closed_by_server(sock)

    response, closed = await blocking(served_then_idle)
    assert response.startswith(b"HTTP/1.1 200")
    assert closed


async def test_public_pages_with_a_stalled_body_cannot_lock_out_a_request_with_the_token(console: Console) -> None:
    # Without a token: a page request that declares a body and never sends it.
    head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\nContent-Length: 1000\r\n\r\n".encode()
    with ExitStack() as stack:

        def stall() -> list[socket.socket]:
            socks = [stack.enter_context(raw(console.port)) for _ in range(MAX_CONNECTIONS)]
            for sock in socks:
                sock.sendall(head)
            return socks

        stalled = await blocking(stall)
        refused = await blocking(lambda: stalled[0].recv(65536))
        response = await blocking(lambda: request(console.port, status_request(console)))
    assert refused.startswith(b"HTTP/1.1 400"), refused[:200]
    assert response.startswith(b"HTTP/1.1 200"), response[:200]


# ----- request bodies -------------------------------------------------------------------------


async def test_a_50_mb_body_with_the_token_is_refused_before_it_is_read(console: Console) -> None:
    head = (
        f"POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {50 * 1024 * 1024}\r\n"
    )
    response = await blocking(lambda: request(console.port, head))  # not a byte of the body is sent
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    detail = json.loads(response.partition(b"\r\n\r\n")[2])["detail"]
    assert f"at most {MAX_BODY_BYTES} bytes" in detail


async def test_a_body_within_the_cap_still_reaches_the_task(console: Console) -> None:
    task = {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(console.workspace)}}
    padded = json.dumps(task) + " " * (MAX_BODY_BYTES - 1000)  # still valid JSON, just under the cap
    async with console.http() as client:
        response = await client.post(
            "/api/tasks", content=padded, headers=console.auth | {"Content-Type": "application/json"}
        )
    assert response.status_code == 200
    assert response.json()["content"][0]["text"] == "remember the milk\n"


# ----- large results --------------------------------------------------------------------------


async def test_a_large_task_result_is_redacted_whole_then_cut_so_no_part_of_a_secret_is_sent(
    console: Console,
) -> None:
    assert console.workspace is not None
    secret = "sk-" + "Zq7Xw3Rt9Yp2Lk5Mn8Bv4Cx6Hj1Gf0Ds"
    before = "lorem ipsum dolor sit amet\n" * (RESULT_CHARS // 27) + "y" * (RESULT_CHARS % 27 - 8) + " "
    text = before + secret + " and more\n" + "consectetur adipiscing elit\n" * 10_000  # the cut falls inside the key
    assert len(before) < RESULT_CHARS < len(before) + len(secret)
    (console.workspace / "big.txt").write_text(text)
    task = {"query": "read big.txt", "context": {"currentWorkingDirectory": str(console.workspace)}}
    async with console.http() as client:
        response = await client.post("/api/tasks", json=task, headers=console.auth)
    assert response.status_code == 200
    result = response.json()
    shown = "".join(block["text"] for block in result["content"] if block["type"] == "text")
    assert shown.startswith("lorem ipsum")
    hidden, total = map(int, re.findall(r"(\d+) of (\d+) characters not shown", shown)[0])
    assert total == len(text) - len(secret) + len("sk-[REDACTED]")  # counted after redaction
    assert total - hidden == RESULT_CHARS and len(shown) < RESULT_CHARS + 200
    assert len(response.content) < RESULT_CHARS + 10_000  # bounded, not the whole file (twice)
    body = secret.removeprefix("sk-")
    assert not any(body[i : i + 6] in response.text for i in range(len(body) - 5))
    assert result["_meta"]["agentify/plan"]["tool"] == "read_text_file"
