"""The composition of a run: `open_gateway` opens every long-lived service and yields them as one frozen
`Services`.

Nothing in it is replaced while serving. What must change lives in one small owner each: the config
and the planner it implies (`settings.LiveConfig`, `settings.PlannerSlot`), what the backends are told
of the client's roots (`BackendManager.forward_roots`). The adapters (the MCP server, the console,
`agentify eval`) each declare the narrow protocol they use; `Services` satisfies all of them.

`open_gateway` starts the backends in the background and yields at once; leaving it closes every
backend session (shielded, bounded), also when the caller is cancelled. What serves the gateway
(the MCP server, the debug console) is attached by the composition root, never imported here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
import mcp_types as types

from agentify._common.background import background
from agentify._common.logging import LogSetup
from agentify.backends import BackendManager, BackendStatus
from agentify.backends.logs import LogListener
from agentify.backends.manifest import cache_dir
from agentify.backends.offers import ChangeListener
from agentify.config import Config, ConfigSources
from agentify.gateway.events import EventBus
from agentify.gateway.offers import Offerings
from agentify.gateway.reload import watch_config
from agentify.gateway.settings import LiveConfig, PlannerSlot
from agentify.gateway.tasks import TaskRunner
from agentify.gateway.traces import TraceStore
from agentify.pinning import PinBook, open_store
from agentify.planner.select import PlannerChoice, PlannerSelector
from agentify.security.redact import Redactor
from agentify.team.access import AccessGate
from agentify.team.audit import AuditLog
from agentify.team.audit import current as current_audit
from agentify.team.identity import Authorizations, Identity
from agentify.team.limits import Limiter
from agentify.telemetry.setup import Telemetry

SHUTDOWN_SECONDS = 10.0


@dataclass(frozen=True)
class Boot:
    """What the composition root prepared before any service opens: the config, the log sink with
    the redactor it masks with (configured first, so start-up errors are logged masked), and the
    process's tracing."""

    sources: ConfigSources
    config: Config
    logs: LogSetup
    redactor: Redactor
    telemetry: Telemetry


@dataclass(frozen=True)
class GatewayStatus:
    """What `list_backends`, `doctor`, the console and eval show: the planner and every backend."""

    planner: PlannerChoice
    backends: list[BackendStatus]


class TaskServices(Protocol):
    """What every adapter (the MCP server, the console, eval) uses of `Services`; each extends it with
    the few more it needs, so none of them reaches into the whole composition."""

    @property
    def settings(self) -> LiveConfig: ...

    @property
    def runner(self) -> TaskRunner: ...

    def status(self, sampling_available: bool = False) -> GatewayStatus: ...


@dataclass(frozen=True, kw_only=True)
class Services:
    settings: LiveConfig
    redactor: Redactor
    """The one secret set of every sink (stderr, console, traces, results; results skip the shape patterns)."""
    logs: LogSetup
    bus: EventBus
    traces: TraceStore
    backends: BackendManager
    planners: PlannerSlot
    runner: TaskRunner
    offerings: Offerings
    """The backends' resources, prompts and completions, as one server."""
    limiter: Limiter
    access: AccessGate
    """What each principal may use (`server.access`), as the config and the policy file say now."""
    pin_book: PinBook
    """The pinned tool definitions (config `pinning`), also while it is off (a reload may switch it on)."""
    telemetry: Telemetry
    started: float

    @property
    def audit(self) -> AuditLog | None:
        """The audit chain this process writes (`server.audit`, while it serves over HTTP), or None."""
        return current_audit()

    def status(self, sampling_available: bool = False) -> GatewayStatus:
        """`sampling_available`: whether the client asking offers MCP sampling (it may change the planner)."""
        return GatewayStatus(self.planners.current.describe(sampling_available), self.backends.statuses())

    @property
    def pins(self) -> PinBook | None:
        """What the console reviews and approves (`console/governance.py`); None while `pinning` is off."""
        return self.pin_book if self.pin_book.mode != "off" else None

    def reading_traces(self) -> AbstractContextManager[None]:
        """While inside, every task is recorded in `traces` (the console, while it serves). Unread,
        tasks keep their trace ids but record nothing (`telemetry.setup`)."""
        return self.telemetry.attached(self.traces)

    async def backends_changed(self) -> None:
        """Returns at the next change of a backend's state or tools."""
        await self.backends.changed()

    def forward_roots(self, roots: list[types.Root]) -> None:
        """The client's roots as they became known: what backends with `forwardRoots` are told."""
        self.backends.forward_roots(roots)

    def on_log(self, listener: LogListener) -> Callable[[], None]:
        """`listener` hears the backends' log messages that no single call owns; returns how to stop it."""
        self.backends.on_log = listener

        def stop() -> None:
            self.backends.on_log = None

        return stop

    def set_log_level(self, level: types.LoggingLevel) -> None:
        """What the backends on 2025-11-25 sessions are asked to log at (`backends/logs.py`)."""
        self.backends.set_log_level(level)

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """`listener` hears every backend's `*/list_changed` and `resources/updated`; returns how to stop it."""
        return self.backends.on_change(listener)


@asynccontextmanager
async def open_gateway(
    boot: Boot, *, reload: bool = False, identity: Authorizations | None = None
) -> AsyncIterator[Services]:
    """`reload`: follow changes of the config file (`serve`); one-shot commands read it once. `identity`: the
    authorizations of OAuth backends by URL, with the vault of backends with `auth.perPrincipal` (`serve`; closed
    here on the way out)."""
    config, redactor = boot.config, boot.redactor
    if isinstance(identity, Identity):
        redactor.add(identity.keys)
    bus = EventBus()
    boot.logs.listeners.append(lambda record: bus.publish("log", record))
    traces = TraceStore(bus, redactor, file=config.trace_file)
    pins = PinBook(config.pinning, open_store(config))
    await anyio.to_thread.run_sync(pins.open)
    backends = BackendManager(
        config.backends,
        on_state=lambda status: bus.publish("backend", status.as_dict()),
        cache_dir=cache_dir(),
        secrets=redactor.add,
        identity=identity,
        pins=pins,
    )
    planners = PlannerSlot(PlannerSelector(config.planner))
    limiter = Limiter(config.server.limits, config.server.redis)
    access = AccessGate(config.server.access)
    runner = TaskRunner(
        backends,
        planners,
        boot.telemetry.tracer,
        redactor,
        config.max_query_chars,
        config.max_result_chars,
        config.max_context_chars,
        limiter=limiter,
        reading=boot.telemetry.reading,
        access=lambda: access.current,
    )
    settings = LiveConfig(boot.sources, config, redactor=redactor, logs=boot.logs, planners=planners, backends=backends)
    settings.listeners.append(lambda changed: limiter.configure(changed.server.limits))
    settings.listeners.append(lambda changed: access.configure(changed.server.access))
    settings.listeners.append(lambda changed: pins.set_mode(changed.pinning))
    services = Services(
        settings=settings,
        redactor=redactor,
        logs=boot.logs,
        bus=bus,
        traces=traces,
        backends=backends,
        planners=planners,
        runner=runner,
        offerings=Offerings(
            backends,
            prefix=lambda: settings.current.prefix,
            charge=limiter.charge_backend,
            access=lambda: access.current,
        ),
        limiter=limiter,
        pin_book=pins,
        access=access,
        telemetry=boot.telemetry,
        started=time.time(),
    )
    with services.reading_traces() if config.trace_file else nullcontext():
        async with background() as tg:  # what the gateway's body raises leaves unwrapped
            await tg.start(backends.run)
            watching = anyio.CancelScope()
            if reload and settings.file_path is not None:
                tg.start_soon(_watch, watching, settings, settings.file_path)
            try:
                yield services
            finally:
                watching.cancel()  # first: no reload may start a backend while they close
                with anyio.CancelScope(shield=True):
                    backends.close()
                    with anyio.move_on_after(SHUTDOWN_SECONDS):
                        await backends.closed.wait()
                    await planners.aclose()
                    # A stdio server leaves with os._exit: what the exporter holds is sent now (bounded).
                    await limiter.aclose()
                    await pins.close()
                    if identity is not None:
                        await identity.aclose()
                    await anyio.to_thread.run_sync(boot.telemetry.flush)


async def _watch(scope: anyio.CancelScope, settings: LiveConfig, path: Path) -> None:
    with scope:
        await watch_config(settings, path)
