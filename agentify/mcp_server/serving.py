"""`agentify serve`: the gateway over stdio (what IDEs start) or over MCP streamable HTTP.

stdio: the SDK's transport with unreadable lines answered (`stdio_guard`); `on_closed` is told when
every backend is closed (the caller's exit watchdog: the SDK's stdin reader thread only returns at EOF).
HTTP, outermost first: WebSocket upgrades closed (`NoWebSockets`), the bearer token with a
back-off per address (`BearerAuth`), a cap and a deadline on request bodies (`BodyLimit`), all
behind the connection gate against idle sockets; `initializationOptions` change nothing.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loguru import logger

from agentify import __version__
from agentify._common.errors import StartFailed
from agentify.config import Config
from agentify.gateway.services import Boot
from agentify.mcp_server.stdio_guard import answering_parse_errors
from agentify.security.http_auth import BearerAuth, NoWebSockets, is_loopback

if TYPE_CHECKING:
    from agentify.mcp_server.client_requests import Questions
    from agentify.mcp_server.server import OpenServices

HTTP_CONNECTIONS = 256  # open connections to `serve --transport http` at once (idle ones make room)
HTTP_BODY_BYTES = 16 * 1024 * 1024  # one MCP message: a tool call may carry a file's content


async def serve_stdio(open_services: OpenServices, config: Config, on_closed: Callable[[], None]) -> None:
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    from agentify.mcp_server.server import build_server

    server = build_server(open_services, on_closed=on_closed, questions=_questions(config))
    logger.info("agentify {} serving MCP on stdio with {} backends", __version__, len(config.backends))

    async with stdio_server() as (read_stream, write_stream), answering_parse_errors(read_stream, write_stream) as read:
        if not await read.wait_first():
            logger.info("stdin ended before the client sent anything: no backend started")
            on_closed()
            return
        await server.run(
            read, write_stream, server.create_initialization_options(NotificationOptions(tools_changed=True))
        )


async def serve_http(open_services: OpenServices, boot: Boot, host: str, port: int, token: str | None) -> None:
    import uvicorn

    from agentify.mcp_server.server import build_server
    from agentify.security.bodies import BodyLimit
    from agentify.security.connections import ConnectionGate

    listener = _listen(host, port)  # before anything starts: a busy port is one line, not a uvicorn log
    # A network client is not the user who started agentify: its initializationOptions change nothing
    # (not the log level either, which is the gateway's, for every client).
    server = build_server(open_services, trust_init_options=False, questions=_questions(boot.config))
    app: Any = BodyLimit(server.streamable_http_app(host=host, streamable_http_path="/mcp"), limit=HTTP_BODY_BYTES)
    url = f"http://{host}:{port}/mcp"
    logger.info("agentify {} serving MCP on {} with {} backends", __version__, url, len(boot.config.backends))
    if token is None:
        logger.warning("serving MCP on {} without authentication (--no-auth): any local process can use it", url)
    else:
        app = BearerAuth(app, token)
        boot.redactor.add([token])
        if os.environ.get("AGENTIFY_HTTP_TOKEN"):
            logger.info("clients must send 'Authorization: Bearer <the value of AGENTIFY_HTTP_TOKEN>'")
        else:
            boot.logs.reveal(
                "agentify", f"clients must send 'Authorization: Bearer {token}' (AGENTIFY_HTTP_TOKEN fixes it)"
            )
        if not is_loopback(host):
            logger.warning("serving MCP on {}: reachable from other machines; only clients with the token get in", host)
    app = NoWebSockets(app)
    # Connections that never send a request time out and cannot crowd out clients with the token.
    gate = ConnectionGate(limit=HTTP_CONNECTIONS)
    settings = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,  # its records go to the redacting sink (LogSetup), not to its own handlers
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=gate.protocol(),
    )
    await uvicorn.Server(settings).serve(sockets=[listener])


def _questions(config: Config) -> Questions:
    from agentify.mcp_server.client_requests import Questions

    return Questions(seconds=config.confirm_timeout_seconds)


def _listen(host: str, port: int) -> socket.socket:
    """The HTTP transport's socket, bound (uvicorn listens on it).

    Raises:
        StartFailed: the address cannot be bound (in use, not an address of this machine)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listener = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise StartFailed(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        fix = "choose another port with --port" if exc.errno == errno.EADDRINUSE else "choose another --host"
        raise StartFailed(f"cannot listen on {host}:{port} ({exc.strerror or exc}); {fix}") from None
    return listener
