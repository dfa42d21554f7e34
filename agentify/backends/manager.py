"""BackendManager: one supervisor per configured backend, their owner tasks, and the catalog of tool handles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from agentify.backends.connection import Connection
from agentify.backends.handles import ToolCatalog
from agentify.backends.logs import LogListener
from agentify.backends.manifest import ManifestStore
from agentify.backends.misconfigured import Misconfigured
from agentify.backends.oauth import SecretSink
from agentify.backends.offers import Change, ChangeListener
from agentify.backends.per_principal import PrincipalBackend
from agentify.backends.personal import PersonalBackend
from agentify.backends.questions import Answerer
from agentify.backends.remote import RemoteConnection
from agentify.backends.routes import ResourceRoutes
from agentify.backends.shared_oauth import SharedOAuthBackend
from agentify.backends.state import BackendState, BackendStatus
from agentify.backends.stderr_log import StderrLog
from agentify.backends.stdio import StdioConnection
from agentify.backends.supervisor import SETTLE_SLACK, StateListener, Supervisor, Wiring
from agentify.config import BackendConfig, ExchangeSettings, OAuthSettings
from agentify.pinning import Held, PinBook
from agentify.team.identity import Authorizations, Identity

CATALOG_WAIT_MAX = 30.0  # a catalog waits at most this long for backends that are still starting


class BackendManager:
    """Starts every eager backend concurrently in the background and owns the supervisors' tasks."""

    def __init__(
        self,
        specs: Iterable[BackendConfig],
        on_state: StateListener | None = None,
        *,
        cache_dir: Path | None = None,
        secrets: SecretSink | None = None,
        identity: Authorizations | None = None,
        pins: PinBook | None = None,
    ) -> None:
        """`secrets` hears the credentials learnt while running (OAuth tokens from the store); `identity` runs the
        authorizations by URL of OAuth backends (`Authorizations`: the shared token file of `agentify auth` is
        then authorized from the IDE of a one-person gateway), and as an `Identity` keeps each principal's tokens
        for backends with `auth.perPrincipal` (without it they use that one token file); `pins` judges every
        listing (config `pinning`)."""
        self._on_state = on_state
        self.pins = pins
        if pins is not None:
            pins.on_change = self._pins_changed
        self._secrets = secrets
        self._identity = identity if isinstance(identity, Identity) else None
        self._authorizations = identity
        self._roots: list[types.Root] = []
        """What backends with `forwardRoots` are told: the client's roots once known (none until then)."""
        self._manifests = ManifestStore(cache_dir)
        self.routes = ResourceRoutes()
        """Which backend reads a resource URI, learnt from every backend's lists and tool results."""
        self._change_listeners: dict[object, ChangeListener] = {}
        self.on_log: LogListener | None = None
        """Hears the backends' log messages that no single call owns (`logs.py`)."""
        self._log_level: types.LoggingLevel | None = None
        self._state_changed = anyio.Event()
        self._wiring = Wiring(
            self._manifests,
            secrets=secrets,
            on_state=self._published,
            roots=self._known_roots,
            routes=self.routes,
            on_change=self._changed,
            on_log=self._logged,
            pins=pins,
        )
        """What every backend is handed (`on_log` only a backend with one session for everyone uses)."""
        self._supervisors: dict[str, Supervisor] = {s.id: self._supervise(s) for s in specs}
        self._tg: TaskGroup | None = None
        self.closed = anyio.Event()
        self._stopping = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Owns the backends until cancelled or `close` is called."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                following = anyio.CancelScope()  # the pins follow the store until the backends stop
                if self.pins is not None:
                    tg.start_soon(_within, following, self.pins.run)
                for supervisor in self._supervisors.values():
                    tg.start_soon(supervisor.run)
                task_status.started()
                await self._stopping.wait()
                following.cancel()
        finally:
            self._tg = None
            self.closed.set()  # also when cancelled (a signal): nobody may wait for a close that never comes

    def reconcile(self, specs: Iterable[BackendConfig]) -> None:
        """Applies a new backend list: removed or changed backends stop, new ones start."""
        assert self._tg is not None, "reconcile needs a running manager"
        wanted = {s.id: s for s in specs}
        for backend_id, supervisor in list(self._supervisors.items()):
            if wanted.get(backend_id) != supervisor.spec:
                supervisor.stop()
                del self._supervisors[backend_id]
        for backend_id, spec in wanted.items():
            if backend_id not in self._supervisors:
                supervisor = self._supervise(spec)
                self._supervisors[backend_id] = supervisor
                self._tg.start_soon(supervisor.run)
                if self._log_level is not None:
                    self._tg.start_soon(supervisor.send_log_level, self._log_level)

    async def changed(self) -> None:
        """Returns at the next change of any backend's state or tools (a start, a restart, a new listing)."""
        await self._state_changed.wait()

    def _published(self, status: BackendStatus) -> None:
        if self._on_state is not None:
            self._on_state(status)
        changed, self._state_changed = self._state_changed, anyio.Event()
        changed.set()

    def _pins_changed(self) -> None:
        """What the pins say may have changed (a listing judged, an approval read): every backend is shown anew."""
        for supervisor in self._supervisors.values():
            self._published(supervisor.status())

    def withheld(self, name: str) -> Held | None:
        """The withheld tool a client calls `name` (`<backend>__<tool>`, or the tool's shown name alone)."""
        for supervisor in self._supervisors.values():
            for held in supervisor.tools.withheld().values():
                shown = supervisor.tools.shown_name(held.tool)
                if name in (f"{supervisor.spec.id}__{shown}", shown):
                    return held
        return None

    def enabled(self) -> list[Supervisor]:
        """The enabled backends, in config order: what the IDE's resource, prompt and completion requests reach."""
        return [s for s in self._supervisors.values() if s.spec.enabled]

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """Calls `listener` (synchronously, it must not block) for every backend's `*/list_changed` and
        `resources/updated`; returns the function that stops it."""
        token = object()
        self._change_listeners[token] = listener

        def stop() -> None:
            self._change_listeners.pop(token, None)

        return stop

    def _changed(self, change: Change) -> None:
        for listener in list(self._change_listeners.values()):
            listener(change)

    def _logged(self, backend: str, params: types.LoggingMessageNotificationParams) -> None:
        if self.on_log is not None:
            self.on_log(backend, params)

    def learns_for_caller(self, tool_name: str) -> bool:
        """Whether `tool_name` (`<backend>__<tool>`) names a backend whose tools nobody has listed yet because each
        person must authorize it first (`auth.perPrincipal`), or its one shared identity must be (the server
        refuses even to list them): a call to it asks the caller to authorize (`learn_for_caller`), or says who may,
        instead of failing as an unknown tool."""
        supervisor = self._supervisors.get(tool_name.partition("__")[0])
        if supervisor is None or supervisor.tools.listed or not supervisor.spec.enabled:
            return False
        if isinstance(supervisor, SharedOAuthBackend):
            return supervisor.state is BackendState.NEEDS_AUTH
        return isinstance(supervisor, PrincipalBackend | PersonalBackend)

    async def learn_for_caller(self, tool_name: str, answerer: Answerer | None) -> bool:
        """When `learns_for_caller(tool_name)`: the caller authorizes (if they must) and their session lists the
        tools. False for any other name. The caller checks first that the principal may use the backend.

        Raises:
            what `PrincipalBackend.learn` raises (NeedsAuth, Declined, BackendUnavailable, AskingClient, ...).
        """
        if not self.learns_for_caller(tool_name):
            return False
        supervisor = self._supervisors[tool_name.partition("__")[0]]
        assert isinstance(supervisor, PrincipalBackend | SharedOAuthBackend | PersonalBackend)
        await supervisor.learn(answerer)
        return True

    def restart(self, backend_id: str) -> BackendStatus:
        """Restarts one backend now (`Supervisor.restart`); returns its status as it is asked.

        Raises:
            KeyError: no backend has this id.
            ValueError: it cannot restart now (disabled, closing, or already starting), with why.
        """
        supervisor = self._supervisors[backend_id]
        if not supervisor.restart():
            why = "it is disabled in the config" if not supervisor.spec.enabled else f"it is {supervisor.state.value}"
            raise ValueError(f"backend {backend_id!r} cannot restart now: {why}")
        return supervisor.status()

    def statuses(self) -> list[BackendStatus]:
        return [s.status() for s in self._supervisors.values()]

    async def catalog(self) -> ToolCatalog:
        """The tools of every enabled backend as handles; waits (bounded) for backends still starting.

        A backend that failed before it was ever ready is asked to start again (after its backoff):
        the planner cannot choose its tools, so no call would ever restart it. Lazy backends with a
        manifest are not started: their handles start them on the first call."""
        for supervisor in self._supervisors.values():
            supervisor.kick()
        settling = [s for s in self._supervisors.values() if s.settling()]
        if settling:
            limit = min(CATALOG_WAIT_MAX, max(s.start_limit for s in settling) + SETTLE_SLACK)
            await _wait_settled(settling, limit)
        enabled = [s for s in self._supervisors.values() if s.spec.enabled]
        handles = {s.spec.id: s.handles() for s in enabled}
        return ToolCatalog(
            key=tuple((s.spec.id, s.spec.description, s.tools.version, s.tools.pins_generation) for s in enabled),
            handles=tuple(handle for s in enabled for handle in handles[s.spec.id]),
            missing=tuple((s.spec.id, s.spec.description, _why_none(s)) for s in enabled if not handles[s.spec.id]),
        )

    async def wait_all_settled(self) -> None:
        """Waits until every enabled backend is ready, idle or failed, bounded by the longest start-up timeout."""
        supervisors = [s for s in self._supervisors.values() if s.spec.enabled]
        if supervisors:
            await _wait_settled(supervisors, max(s.start_limit for s in supervisors) + SETTLE_SLACK)

    def set_log_level(self, level: types.LoggingLevel) -> None:
        """The level every backend on a 2025-11-25 session logs at (`logging/setLevel`), now and after restarts."""
        self._log_level = level
        if self._tg is None:
            return
        for supervisor in self._supervisors.values():
            self._tg.start_soon(supervisor.send_log_level, level)

    def forward_roots(self, roots: list[types.Root]) -> None:
        """The roots backends with `forwardRoots` answer `roots/list` with from now on; a running one is told
        they changed (notifications/roots/list_changed)."""
        if roots == self._roots:
            return
        self._roots = list(roots)
        if self._tg is None:
            return
        for supervisor in self._supervisors.values():
            if supervisor.spec.forward_roots:
                self._tg.start_soon(supervisor.send_roots_changed)

    def _supervise(self, spec: BackendConfig) -> Supervisor:
        per_principal = isinstance(spec.auth, OAuthSettings) and spec.auth.per_principal and self._identity is not None
        if spec.problem is None and (per_principal or isinstance(spec.auth, ExchangeSettings)):
            return PrincipalBackend(spec, self._wiring, self._identity)
        shared_oauth = isinstance(spec.auth, OAuthSettings) and not spec.auth.per_principal
        if spec.problem is None and shared_oauth and self._authorizations is not None:
            return SharedOAuthBackend(spec, self._wiring, self._authorizations)
        if spec.problem is None and spec.personal_secrets and self._identity is not None:
            return PersonalBackend(spec, self._wiring, self._identity)
        stderr = StderrLog(spec.id)
        connection: Connection
        more: Callable[[], Connection] | None = None  # how an extra session connects, when calls overlap
        if spec.problem is not None:
            connection = Misconfigured(spec, spec.problem)
        elif spec.remote:
            connection = RemoteConnection(spec, self._secrets)
            if not spec.oauth:  # OAuth sessions would share one refresh token, which servers may rotate
                more = lambda: RemoteConnection(spec, self._secrets)  # noqa: E731
        else:
            connection = StdioConnection(spec, stderr)
            more = lambda: StdioConnection(spec, stderr)  # noqa: E731
        w = self._wiring
        return Supervisor(
            spec, connection, stderr, w.manifests, w.on_state, w.roots, w.routes, w.on_change, w.on_log, w.pins, more
        )

    def _known_roots(self) -> list[types.Root]:
        return self._roots

    def close(self) -> None:
        """Asks every owner to close its session; `run` returns once they have."""
        for supervisor in self._supervisors.values():
            supervisor.stop()
        self._stopping.set()


async def _within(scope: anyio.CancelScope, run: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await run()


def _why_none(supervisor: Supervisor) -> str:
    if withheld := supervisor.tools.withheld():
        names = ", ".join(sorted(withheld))
        return f"its tools ({names}) are withheld by pinning until approved: agentify pins approve {supervisor.spec.id}"
    return f"{supervisor.state.value}: {supervisor.last_error or 'no tools listed'}"


async def _wait_settled(supervisors: list[Supervisor], seconds: float) -> None:
    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as tg:
            for supervisor in supervisors:
                tg.start_soon(supervisor.wait_settled, seconds)
