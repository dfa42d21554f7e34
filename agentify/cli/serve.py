"""`agentify serve`: composes the gateway's services with the debug console, and serves them over
stdio (what IDEs start) or MCP streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from agentify._common.exit import ExitWatchdog
from agentify.cli.errors import EXIT_OK
from agentify.cli.output import close_stdout
from agentify.cli.running import run_async
from agentify.gateway.services import SHUTDOWN_SECONDS, Boot, Services, open_gateway
from agentify.mcp_server.server import OpenServices
from agentify.mcp_server.serving import serve_http, serve_stdio
from agentify.team.identity import Identity, identity_for


def _services(boot: Boot, identity: Identity | None) -> OpenServices:
    @asynccontextmanager
    async def open_services() -> AsyncIterator[Services]:
        from agentify.console import attached_console

        async with open_gateway(boot, reload=True, identity=identity) as services, attached_console(services):
            yield services

    return open_services


def serve_stdio_command(boot: Boot) -> int:
    exit_after = ExitWatchdog(SHUTDOWN_SECONDS)
    close_stdout("the MCP protocol")

    identity = identity_for(boot.config)

    async def main() -> int:
        await serve_stdio(_services(boot, identity), boot.config, exit_after, identity)
        return EXIT_OK

    run_async(main, on_signal=exit_after.signal)
    return EXIT_OK  # stopped by stdin's end or by a signal: both are a clean stop


def serve_http_command(boot: Boot, host: str, port: int, token: str | None) -> int:
    """uvicorn handles SIGTERM and SIGINT itself and shuts the app (and so every backend) down."""
    identity = identity_for(boot.config)
    anyio.run(serve_http, _services(boot, identity), boot, host, port, token, identity)
    return EXIT_OK
