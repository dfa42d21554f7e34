"""`agentify serve`: the gateway over stdio (what IDEs start) or over MCP streamable HTTP.

stdio: the SDK's transport with unreadable lines answered (`stdio_guard`), and a watchdog that ends
the process once every backend is closed (the SDK's stdin reader thread only returns at EOF).
HTTP: the bearer token in front (`http_auth`), the console's connection gate against idle sockets,
and `initializationOptions` reduced to the log level.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
from typing import Any

from loguru import logger

from agentify import __version__
from agentify.cli_errors import EXIT_OK, StartFailed
from agentify.config import Config, ConfigSources
from agentify.http_auth import BearerAuth, is_loopback
from agentify.logging import LogSetup
from agentify.stdio_guard import answering_parse_errors

# After SIGTERM or SIGINT, leave at once once every backend is closed; after stdin EOF the
# process normally ends by itself, and this only catches a stuck exit.
EXIT_WATCHDOG_SECONDS = 2.0
HTTP_CONNECTIONS = 256  # open connections to `serve --transport http` at once (idle ones make room)


async def serve_stdio(sources: ConfigSources, config: Config, logs: LogSetup, exit_after: ExitWatchdog) -> int:
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    from agentify.server import build_server

    server = build_server(sources, config, logs, on_closed=exit_after.closed)
    logger.info("agentify {} serving MCP on stdio with {} backends", __version__, len(config.backends))

    async with stdio_server() as (read_stream, write_stream), answering_parse_errors(read_stream, write_stream) as read:
        await server.run(read, write_stream, server.create_initialization_options(NotificationOptions()))
    return EXIT_OK


async def serve_http(
    sources: ConfigSources, config: Config, logs: LogSetup, host: str, port: int, token: str | None
) -> int:
    import uvicorn

    from agentify.console.connections import ConnectionGate
    from agentify.server import build_server

    listener = _listen(host, port)  # before anything starts: a busy port is one line, not a uvicorn log
    # A network client is not the user who started agentify: its initializationOptions change nothing
    # but the log level (no backends, commands, URLs, headers, env or keys).
    server = build_server(sources, config, logs, trust_init_options=False)
    app: Any = server.streamable_http_app(host=host, streamable_http_path="/mcp")
    url = f"http://{host}:{port}/mcp"
    logger.info("agentify {} serving MCP on {} with {} backends", __version__, url, len(config.backends))
    if token is None:
        logger.warning("serving MCP on {} without authentication (--no-auth): any local process can use it", url)
    else:
        app = BearerAuth(app, token)
        logs.redactor.add([token])
        if os.environ.get("AGENTIFY_HTTP_TOKEN"):
            logger.info("clients must send 'Authorization: Bearer <the value of AGENTIFY_HTTP_TOKEN>'")
        else:
            logs.reveal("agentify", f"clients must send 'Authorization: Bearer {token}' (AGENTIFY_HTTP_TOKEN fixes it)")
        if not is_loopback(host):
            logger.warning("serving MCP on {}: reachable from other machines; only clients with the token get in", host)
    # Connections that never send a request time out and cannot crowd out clients with the token.
    gate = ConnectionGate(limit=HTTP_CONNECTIONS)
    settings = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="on", http=gate.protocol()
    )
    await uvicorn.Server(settings).serve(sockets=[listener])
    return EXIT_OK


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


class ExitWatchdog:
    """Ends `serve` once every backend is closed. The SDK reads stdin in a worker thread that only
    returns at EOF, so after a signal the process would otherwise wait for input forever."""

    def __init__(self) -> None:
        self.signalled = threading.Event()

    def signal(self) -> None:
        """A signal arrived: leave as soon as the backends are closed, and in any case once their
        close (bounded by SHUTDOWN_SECONDS) must be over, should a signal beat the gateway's start."""
        from agentify.app import SHUTDOWN_SECONDS

        self.signalled.set()
        _exit_after(SHUTDOWN_SECONDS + EXIT_WATCHDOG_SECONDS)

    def closed(self) -> None:
        _exit_after(0.0 if self.signalled.is_set() else EXIT_WATCHDOG_SECONDS)


def _exit_after(seconds: float) -> None:
    def hard_exit() -> None:
        logger.info("agentify stopped")
        sys.stderr.flush()
        os._exit(EXIT_OK)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()
