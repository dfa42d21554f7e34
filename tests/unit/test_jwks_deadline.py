"""The issuer's keys are fetched within an overall deadline: an issuer (or something in between) that
trickles its answer a byte at a time cannot hold the requests that wait for the keys (28 s were seen)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from agentify.team.jwt_auth import IssuerKeys, IssuerUnreachable

pytestmark = pytest.mark.anyio


class Trickle(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(120):  # a byte every 0.25 s: every read is quick, the whole answer takes 30 s
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.25)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def trickling_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()
    server.server_close()


async def test_a_trickled_jwks_is_given_up_at_the_overall_deadline(trickling_url: str) -> None:
    keys = IssuerKeys("http://127.0.0.1/issuer", trickling_url, total_seconds=1.0)
    with anyio.fail_after(15), pytest.raises(IssuerUnreachable, match="did not answer whole within 1 s"):
        await keys.key("any")
