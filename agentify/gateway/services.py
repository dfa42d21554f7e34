"""The composition root's long-lived state: one `Gateway` owns every resource of a run.

`open_gateway` starts the backends in the background and yields at once; leaving it closes every
backend session (shielded, bounded), also when the caller is cancelled. What serves the gateway
(the MCP server, the debug console) is attached by the composition root, never imported here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from loguru import logger

from agentify._common.logging import LogSetup
from agentify.backends import BackendManager, BackendStatus
from agentify.backends.manifest import cache_dir
from agentify.config import Config, ConfigSources
from agentify.errors import ConfigError
from agentify.gateway.events import EventBus
from agentify.gateway.tasks import TaskRunner
from agentify.gateway.traces import TraceStore
from agentify.planner.select import PlannerSelector
from agentify.security.redact import Redactor

SHUTDOWN_SECONDS = 10.0


@dataclass(frozen=True)
class Boot:
    """What the composition root prepared before any service opens: the config, and the log sink
    with the redactor it masks with (configured first, so start-up errors are logged masked)."""

    sources: ConfigSources
    config: Config
    logs: LogSetup
    redactor: Redactor


@dataclass
class Gateway:
    sources: ConfigSources
    config: Config
    logs: LogSetup
    redactor: Redactor
    """The one secret set of every sink (stderr, console, traces, results; results skip the shape patterns)."""
    bus: EventBus
    traces: TraceStore
    manager: BackendManager
    planners: PlannerSelector
    runner: TaskRunner
    started: float = field(default_factory=time.time)
    init_options_applied: bool = False
    retired_planners: list[PlannerSelector] = field(default_factory=list)
    client_roots: list[types.Root] | None = None
    """The IDE client's roots (workspace folders), once asked; None until then or after the client
    said they changed (`notifications/roots/list_changed`). The first `file://` root is the working
    directory of a task whose context names none."""
    roots_listeners: list[Callable[[list[types.Root] | None], None]] = field(default_factory=list)
    """Called with the new roots whenever `client_roots` changes (to forward them to backends)."""
    config_listeners: list[Callable[[Config], None]] = field(default_factory=list)
    """Called with the new config when the client's `initializationOptions` changed it (the console
    follows a `DEBUG_PORT` that came with them)."""

    def set_client_roots(self, roots: list[types.Root] | None) -> None:
        if roots == self.client_roots:
            return
        self.client_roots = roots
        logger.info("client roots: {}", ", ".join(str(r.uri) for r in roots) if roots else "none known")
        for listener in self.roots_listeners:
            listener(roots)

    def apply_init_options(self, options: Mapping[str, Any], *, trusted: bool = True) -> None:
        """Merges the client's `initializationOptions` in (below env and flags). A bad value is logged, not fatal.

        Only the first client's options apply. An untrusted client (any HTTP client: it did not start
        agentify) may set the log level only: never backends, commands, URLs, headers, env or keys."""
        if not trusted:
            ignored = sorted(set(options) - {"logLevel"})
            if ignored:
                logger.warning("initializationOptions over HTTP may only set logLevel; ignored: {}", ", ".join(ignored))
            level = options.get("logLevel")
            if isinstance(level, str):
                try:
                    self.logs.set_level(self.sources.resolve({"logLevel": level}).log_level)
                except ConfigError as exc:
                    logger.error("initializationOptions.logLevel ignored: {}", exc)
            return
        if self.init_options_applied:
            logger.info("initializationOptions of a later client ignored: the first client's apply")
            return
        self.init_options_applied = True
        try:
            config = self.sources.resolve(options)
        except ConfigError as exc:
            logger.error("initializationOptions ignored: {}", exc)
            return
        self.redactor.add(config.secrets())
        if config.log_level != self.config.log_level:
            self.logs.set_level(config.log_level)
        if config.planner != self.config.planner:
            self.retired_planners.append(self.planners)  # closed at shutdown: a task may still use it
            self.planners = PlannerSelector(config.planner)
            self.runner.planners = self.planners
        if config.backends != self.config.backends:
            self.manager.reconcile(config.backends)
        self.config = config
        for listener in self.config_listeners:
            listener(config)
        logger.info("initializationOptions applied: {} backends", len(config.backends))


def _on_backend_state(bus: EventBus) -> Any:
    def publish(status: BackendStatus) -> None:
        bus.publish("backend", status.as_dict())

    return publish


@asynccontextmanager
async def open_gateway(boot: Boot) -> AsyncIterator[Gateway]:
    sources, config, logs, redactor = boot.sources, boot.config, boot.logs, boot.redactor
    bus = EventBus()
    logs.listeners.append(lambda record: bus.publish("log", record))
    traces = TraceStore(bus, redactor, file=config.trace_file)
    known_roots: list[types.Root] = []  # what forwardRoots backends are told: the client's roots, once known
    manager = BackendManager(
        config.backends, on_state=_on_backend_state(bus), cache_dir=cache_dir(), roots=lambda: known_roots
    )
    planners = PlannerSelector(config.planner)
    runner = TaskRunner(
        manager, planners, traces, config.max_query_chars, config.max_result_chars, config.max_context_chars
    )
    gateway = Gateway(sources, config, logs, redactor, bus, traces, manager, planners, runner)

    def forward_roots(roots: list[types.Root] | None) -> None:
        if roots is not None and roots != known_roots:
            known_roots[:] = roots
            manager.roots_changed()

    gateway.roots_listeners.append(forward_roots)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        try:
            yield gateway
        finally:
            with anyio.CancelScope(shield=True):
                manager.close()
                with anyio.move_on_after(SHUTDOWN_SECONDS):
                    await manager.closed.wait()
                for planners in (*gateway.retired_planners, gateway.planners):
                    await planners.aclose()
            tg.cancel_scope.cancel()
