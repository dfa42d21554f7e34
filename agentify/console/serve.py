"""uvicorn inside the gateway's own event loop, on a socket bound here.

Binding first (instead of letting uvicorn do it) turns a port in use into a warning: uvicorn
would call `sys.exit`. uvicorn's signal capture is switched off, because SIGINT and SIGTERM
belong to the gateway; its own log records go to loguru (redacted), at WARNING and above.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import anyio
import uvicorn
from loguru import logger

from agentify._common.listen import EmbeddedServer, listening_socket
from agentify._common.logging import route_stdlib
from agentify.console.api import create_app
from agentify.console.security import Access
from agentify.security.connections import MAX_CONNECTIONS, ConnectionGate

if TYPE_CHECKING:
    from agentify.console.views import ConsoleServices

GRACEFUL_SECONDS = 2  # open requests and WebSockets get this long when the console stops
WS_MAX_MESSAGE = 64 * 1024  # the page only sends tiny messages


async def serve_console(services: ConsoleServices, host: str, port: int, token: str, stop: anyio.Event) -> None:
    """Serves the console until `stop` is set (or the caller is cancelled)."""
    try:
        sock = listening_socket(host, port, MAX_CONNECTIONS)
    except OSError as exc:
        logger.warning(
            "debug console not started: cannot listen on {}:{} ({}); the gateway keeps serving without it. "
            "Choose another port with --debug-port or AGENTIFY_DEBUG_PORT.",
            host,
            port,
            exc.strerror or exc,
        )
        return
    with sock:
        access = Access(token=token, host=host, port=sock.getsockname()[1])
        if not access.loopback:
            logger.warning(
                "debug console bound to {}, not 127.0.0.1: other machines can reach it, and anyone with the "
                "token can read the logs and run tasks. Leave out --debug-host unless you need this.",
                host,
            )
        route_stdlib("uvicorn", "console server", _NOT_AN_ERROR)
        server = EmbeddedServer(
            uvicorn.Config(
                create_app(services, access),
                log_config=None,
                access_log=False,  # request lines would carry ?token=
                lifespan="off",
                http=ConnectionGate().protocol(),  # idle and slow connections time out, see connections.py
                ws="websockets-sansio",
                ws_max_size=WS_MAX_MESSAGE,
                limit_concurrency=None,  # it counted idle connections: 64 of them made every request a 503
                timeout_graceful_shutdown=GRACEFUL_SECONDS,
                server_header=False,
            )
        )
        _announce(services, access)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_exit_on, stop, server)
            try:
                await server.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
                for listener in getattr(server, "servers", []):  # when cancelled before uvicorn's own shutdown
                    listener.close()


async def _exit_on(stop: anyio.Event, server: uvicorn.Server) -> None:
    await stop.wait()
    server.should_exit = True


def _announce(services: ConsoleServices, access: Access) -> None:
    """The one line that shows the token: written to stderr around the redacting log sink.
    The console's own log view gets the same line without the token."""
    services.logs.reveal("agentify.console", f"debug console: {access.url_with_token}")
    message = f"debug console: {access.base_url} (open the URL with the token from agentify's stderr)"
    services.bus.publish(
        "log",
        {
            "time": datetime.now().timestamp(),
            "level": "INFO",
            "logger": "agentify.console",
            "message": message,
            "extra": {},
        },
    )


# uvicorn's websockets-sansio protocol reports every refused upgrade (our 401/403 denial responses) so.
_NOT_AN_ERROR = frozenset({"ASGI callable returned without completing handshake."})
