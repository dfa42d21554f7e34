"""The two pieces of the gateway's state that change while it serves, each kept in one owner.

`LiveConfig` is the effective configuration. It is loaded at start and changed by the first client's
`initializationOptions` (over stdio), which rank below the environment and the flags, and by each
valid change of the config file (`reload`, while `serve` runs). What a new config implies is applied
here, in this order: its secrets are masked, the log level set, the planner replaced, the backends
reconciled (only the added, removed and changed ones start or stop); then `listeners` (the console,
the rate limiter) hear of it. `expose` and `prefix` are read from `current` wherever they are used, so they follow too.
The keys in `RESTART_KEYS` shape objects built once at start (Redis, the auth gate, the trace file,
the task runner's bounds): a reload that changes one says so, once, as a warning naming
each, rather than logging a success that did not happen.

`PlannerSlot` holds the planner selector that the config implies. A new planner config puts a new
selector in the slot; the replaced ones are closed only at shutdown, since a task may still use one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from loguru import logger

from agentify.config import BackendConfig, Config, ConfigSources, PlannerConfig
from agentify.errors import ConfigError
from agentify.planner.select import PlannerSelector
from agentify.security.redact import Redactor

RESTART_KEYS = (
    ("traceFile",),
    ("otel",),
    ("maxQueryChars",),
    ("maxContextChars",),
    ("maxResultChars",),
    ("confirmTimeoutSeconds",),
    ("server", "auth"),
    ("server", "publicUrl"),
    ("server", "redis"),
    ("server", "drainSeconds"),
)


def restart_keys(before: Config, after: Config) -> list[str]:
    """The keys in `RESTART_KEYS` whose value differs, spelled as in the file (`server.limits`)."""
    old, new = (c.model_dump(mode="json", by_alias=True) for c in (before, after))
    changed: list[str] = []
    for path in RESTART_KEYS:
        was: Any = old
        now: Any = new
        for part in path:
            was, now = (was or {}).get(part), (now or {}).get(part)
        if was != now:
            changed.append(".".join(path))
    return changed


class Reconciler(Protocol):
    """The backend manager, as far as a new config concerns it."""

    def reconcile(self, specs: list[BackendConfig]) -> None: ...


class Levelled(Protocol):
    """The log set-up, as far as a new config concerns it."""

    def set_level(self, level: str) -> None: ...


class PlannerSlot:
    def __init__(self, selector: PlannerSelector) -> None:
        self._current = selector
        self._retired: list[PlannerSelector] = []

    @property
    def current(self) -> PlannerSelector:
        """The selector for the next task: read it per task, never keep it."""
        return self._current

    def configure(self, config: PlannerConfig) -> None:
        """Puts a selector for `config` in the slot, unless the current one already is."""
        if config != self._current.config:
            self._retired.append(self._current)
            self._current = PlannerSelector(config)

    async def aclose(self) -> None:
        for selector in (*self._retired, self._current):
            await selector.aclose()


class LiveConfig:
    def __init__(
        self,
        sources: ConfigSources,
        config: Config,
        *,
        redactor: Redactor,
        logs: Levelled,
        planners: PlannerSlot,
        backends: Reconciler,
    ) -> None:
        self._sources = sources
        self._current = config
        self._redactor = redactor
        self._logs = logs
        self._planners = planners
        self._backends = backends
        self._applied = False
        self._init_options: Mapping[str, Any] = {}
        self.listeners: list[Callable[[Config], None]] = []
        """Called with the new config once the client's `initializationOptions` or the file changed it (the
        console follows a `DEBUG_PORT` that came with them)."""
        self.reloaded: list[Callable[[], Awaitable[None]]] = []
        """Awaited after the file changed the config (the MCP server tells its client the tools changed)."""

    @property
    def current(self) -> Config:
        return self._current

    @property
    def file_path(self) -> Path | None:
        return self._sources.file_path

    def apply_init_options(self, options: Mapping[str, Any]) -> None:
        """Merges the client's `initializationOptions` in (below env and flags). A bad value is logged, not fatal.

        Only the first client's options apply, and only over stdio (the caller's rule): that client started
        agentify, so its options are its own config."""
        if self._applied:
            logger.info("initializationOptions of a later client ignored: the first client's apply")
            return
        self._applied = True
        try:
            config = self._sources.resolve(options)
        except ConfigError as exc:
            logger.error("initializationOptions ignored: {}", exc)
            return
        self._init_options = options
        self._apply(config)
        logger.info("initializationOptions applied: {} backends", len(config.backends))

    def reload(self) -> bool:
        """Reads the config file again and applies it when it is valid and different; True when it was.

        An invalid file is logged and the running config stays, so a half-saved edit stops nothing."""
        try:
            sources = self._sources.reread()
            config = sources.resolve(self._init_options)
        except ConfigError as exc:
            logger.error("the config file changed but the running config stays: {}", exc)
            return False
        if config == self._current:
            return False
        before = {b.id: b for b in self._current.backends}
        after = {b.id: b for b in config.backends}
        changes = [
            *(f"added {i}" for i in after if i not in before),
            *(f"removed {i}" for i in before if i not in after),
            *(f"restarted {i}" for i in after if i in before and after[i] != before[i]),
        ]
        stale = restart_keys(self._current, config)
        self._sources = sources
        self._apply(config)
        logger.info("config file {} reloaded: {}", self.file_path, ", ".join(changes) or "backends unchanged")
        if stale:
            logger.warning(
                "config file {} changed {}, which take effect only when agentify starts again: restart `agentify "
                "serve` (or the IDE's agentify entry); until then the old values apply",
                self.file_path,
                ", ".join(stale),
            )
        return True

    def _apply(self, config: Config) -> None:
        self._redactor.add(config.secrets())
        if config.log_level != self._current.log_level:
            self._logs.set_level(config.log_level)
        self._planners.configure(config.planner)
        if config.backends != self._current.backends:
            self._backends.reconcile(config.backends)
        self._current = config
        for listener in self.listeners:
            listener(config)
