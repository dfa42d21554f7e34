"""`agentify serve`: composes the gateway's services with the debug console, and serves them over
stdio (what IDEs start) or MCP streamable HTTP.

Over stdio the gateway opens at the client's first message, so a gateway that nobody speaks to starts
no backend; with a debug port set at start (`--debug-port`, `AGENTIFY_DEBUG_PORT`, the config file) it
opens at once instead, so the console serves (and can start and call the backends) before any client
speaks. A debug port that the client's `initializationOptions` bring starts the console then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from agentify._common.exit import ExitWatchdog
from agentify.cli.errors import EXIT_OK
from agentify.cli.output import close_stdout
from agentify.cli.running import run_async
from agentify.gateway.services import SHUTDOWN_SECONDS, Boot, Services, open_gateway
from agentify.mcp_server.server import OpenServices
from agentify.mcp_server.serving import serve_http, serve_stdio
from agentify.team.identity import Authorizations, authorizations_for, identity_for


@asynccontextmanager
async def _inspected_gateway(boot: Boot, identity: Authorizations | None) -> AsyncIterator[Services]:
    from agentify.console import attached_console

    async with open_gateway(boot, reload=True, identity=identity) as services, attached_console(services):
        yield services


def _services(boot: Boot, identity: Authorizations | None) -> OpenServices:
    return lambda: _inspected_gateway(boot, identity)


def _already_open(services: Services) -> OpenServices:
    """The MCP server's lifespan over services the caller keeps open (and closes)."""

    @asynccontextmanager
    async def open_services() -> AsyncIterator[Services]:
        yield services

    return open_services


async def _gateway_until(
    boot: Boot,
    identity: Authorizations | None,
    done: anyio.Event,
    exits: ExitWatchdog,
    *,
    task_status: anyio.abc.TaskStatus[Services],
) -> None:
    """The gateway, open from the start until `done` or a signal; then `exits` is told every backend is closed.
    Its own task, so a signal closes it even while the SDK's stdin thread still holds `serve_stdio`."""
    try:
        async with _inspected_gateway(boot, identity) as services:
            task_status.started(services)
            await done.wait()
    finally:
        exits.closed()


class _KeptOpen(ExitWatchdog):
    """What `serve_stdio` tells when the gateway opened before the client spoke: nothing. Its backends close
    when the gateway's own context leaves, and only then is the real watchdog told."""

    def serving(self) -> None:
        pass

    def closed(self) -> None:
        pass


def serve_stdio_command(boot: Boot) -> int:
    exit_after = ExitWatchdog(SHUTDOWN_SECONDS)
    close_stdout("the MCP protocol")

    identity = authorizations_for(boot.config, identity_for(boot.config))

    async def main() -> int:
        if boot.config.debug_port is None:
            await serve_stdio(_services(boot, identity), boot.config, exit_after, identity)
            return EXIT_OK
        exit_after.serving()  # the gateway opens now: from here a signal waits for its backends to close
        stdin_done = anyio.Event()
        async with anyio.create_task_group() as tg:
            services: Services = await tg.start(_gateway_until, boot, identity, stdin_done, exit_after)
            try:
                await serve_stdio(_already_open(services), boot.config, _KeptOpen(SHUTDOWN_SECONDS), identity)
            finally:
                stdin_done.set()
        return EXIT_OK

    run_async(main, on_signal=exit_after.signal)
    return EXIT_OK  # stopped by stdin's end or by a signal: both are a clean stop


def serve_http_command(boot: Boot, host: str, port: int, token: str | None) -> int:
    """uvicorn handles SIGTERM and SIGINT itself and shuts the app (and so every backend) down."""
    identity = authorizations_for(boot.config, identity_for(boot.config))
    anyio.run(serve_http, _services(boot, identity), boot, host, port, token, identity)
    return EXIT_OK
