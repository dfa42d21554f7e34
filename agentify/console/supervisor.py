"""Starts, moves and stops the console with the gateway: at most one console at a time.

Lives in the gateway's task group. `apply` is synchronous, so a gateway config listener
can start the console when the client's `initializationOptions` bring `DEBUG_PORT`.
`attached_console` runs it beside a gateway for as long as the gateway serves.
A console that cannot start, or fails, is logged; the gateway keeps serving without it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup
from loguru import logger

from agentify._common.background import background
from agentify.config import Config

if TYPE_CHECKING:
    from agentify.console.views import ConsoleServices

STOP_SECONDS = 5.0
TOKEN_ENV = "AGENTIFY_DEBUG_TOKEN"
MIN_TOKEN_CHARS = 16


def console_token(environ: Mapping[str, str]) -> str:
    """`AGENTIFY_DEBUG_TOKEN` when it is long enough to resist guessing, else a random token."""
    token = environ.get(TOKEN_ENV, "").strip()
    if token and len(token) < MIN_TOKEN_CHARS:
        logger.warning(
            "{} is shorter than {} characters, so it could be guessed; using a random console token instead",
            TOKEN_ENV,
            MIN_TOKEN_CHARS,
        )
        token = ""
    return token or secrets.token_urlsafe(24)


@dataclass(eq=False)
class _Console:
    host: str
    port: int
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


class ConsoleSupervisor:
    def __init__(
        self, services: ConsoleServices, task_group: TaskGroup, environ: Mapping[str, str] | None = None
    ) -> None:
        self._services = services
        self._tg = task_group
        self._environ = os.environ if environ is None else environ
        self._token: str | None = None
        self._current: _Console | None = None
        self._live: list[_Console] = []

    @property
    def token(self) -> str:
        """One token per gateway start (kept when the console moves); masked in every log and trace."""
        if self._token is None:
            self._token = console_token(self._environ)
            self._services.redactor.add([self._token])
        return self._token

    def apply(self, config: Config) -> None:
        """Starts the console when a debug port is set, or moves it when its port or host changed."""
        wanted = None if config.debug_port is None else (config.debug_host, config.debug_port)
        previous = self._current
        if previous is not None and (previous.host, previous.port) == wanted:
            return
        if previous is not None:
            previous.stop.set()
        self._current = None
        if wanted is not None:
            self._current = _Console(*wanted)
            self._live.append(self._current)
            self._tg.start_soon(self._serve, self._current, previous)

    async def aclose(self) -> None:
        """Stops every console, bounded; call it shielded, before the backends close."""
        self._current = None
        for console in self._live:
            console.stop.set()
        with anyio.move_on_after(STOP_SECONDS):
            for console in list(self._live):
                await console.done.wait()

    async def _serve(self, console: _Console, previous: _Console | None) -> None:
        try:
            if previous is not None:  # it may hold the port we want
                with anyio.move_on_after(STOP_SECONDS):
                    await previous.done.wait()
            try:
                from agentify.console.serve import serve_console
            except ModuleNotFoundError as exc:
                logger.warning(
                    "debug console not started: the module {} is missing; install the console extra of agentify's "
                    "distribution: pip install 'mcp-agentify[console]' "
                    "(pipx: pipx inject mcp-agentify fastapi websockets)",
                    exc.name,
                )
                return
            with self._services.reading_traces():  # tasks are recorded while a console can show them
                await serve_console(self._services, console.host, console.port, self.token, console.stop)
        except Exception:  # top-level handler of the console's task: the gateway must keep serving
            logger.exception("the debug console stopped after an unexpected error; the gateway keeps serving")
        finally:
            console.done.set()
            self._live.remove(console)


@asynccontextmanager
async def attached_console(services: ConsoleServices) -> AsyncIterator[None]:
    """Serves the console of the gateway's `services` while inside (when a debug port is set, now or by a
    later config change); leaving stops it, bounded, before the gateway closes its backends."""
    async with background() as tg:
        supervisor = ConsoleSupervisor(services, tg)
        services.settings.listeners.append(supervisor.apply)
        supervisor.apply(services.settings.current)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await supervisor.aclose()
