"""`agentify serve`: the gateway over stdio (what IDEs start) or over MCP streamable HTTP.

stdio: on pipes the event loop's own (`stdio_pipes`), elsewhere the SDK's transport, with unreadable
lines answered (`stdio_guard`); the caller's exit watchdog is told when the client has spoken and when
every backend is closed (the SDK's stdin reader thread only returns at EOF).
HTTP, outermost first: WebSocket upgrades closed (`NoWebSockets`), the health routes
(`team.drain.ReplicaRoutes`), the bearer token of `server.auth` with a back-off per address
(`team.authentication.protect`; behind the proxies of `server.trustedProxies` the address is the right-most
of X-Forwarded-For that is not one of them), a cap and a deadline on request bodies (`BodyLimit`), the
drain gate (`team.drain.DrainGate`: behind the token check and the body's deadline) and, with `server.redis`,
in front of it the relay of cancels for calls other replicas run (`team.cancellations`), all behind the
connection gate against idle sockets; then the endpoint (`http_app`: a request whose result comes alone is
answered with one JSON body). `initializationOptions` change nothing.
`GET /metrics` sits beside the health routes (`team.metrics`), and every operation is handed to the
metrics and, with `server.audit`, to the audit chain (`team.audit`, open while the server serves).
SIGTERM drains (`Replica.drain`) before the server stops.
"""

from __future__ import annotations

import errno
import gc
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from loguru import logger

from agentify import __version__
from agentify._common.background import background
from agentify._common.errors import StartFailed
from agentify._common.exit import ExitWatchdog
from agentify._common.signals import stop_signals
from agentify.config import Config
from agentify.gateway.services import Boot
from agentify.mcp_server.stdio_guard import answering_parse_errors
from agentify.mcp_server.stdio_pipes import pipe_stdio
from agentify.team.http_auth import NoWebSockets, is_loopback

if TYPE_CHECKING:
    from agentify._common.listen import EmbeddedServer
    from agentify.mcp_server.client_requests import Questions
    from agentify.mcp_server.server import OpenServices
    from agentify.team.audit import AuditLog
    from agentify.team.cancellations import CancelChannel
    from agentify.team.drain import Replica
    from agentify.team.identity import Authorizations

HTTP_CONNECTIONS = 256  # open connections to `serve --transport http` at once (idle ones make room)
HTTP_BODY_BYTES = 16 * 1024 * 1024  # one MCP message: a tool call may carry a file's content
CLOSE_SECONDS = 2  # after the drain: for the last replies to leave, and open event streams to be cut
YOUNG_OBJECTS = 20_000
"""How many new objects the garbage collector lets pile up before it looks at them (Python's default: 700).
A call over HTTP makes thousands, and most are gone again when it ends: collected every 700, the survivors of
the moment were traversed several times a call, with the caches cold after a wait. A replica's CPU per call
(`scripts/bench_team.py`'s load) was 2-8 % lower than at 700 in paired rounds, a little less at 5,000 or 100,000."""


async def serve_stdio(
    open_services: OpenServices, config: Config, exits: ExitWatchdog, identity: Authorizations | None = None
) -> None:
    """`exits` is told when the client has spoken (from then on a signal waits for the backends to close)
    and when every backend is closed. `identity`: OAuth backends authorized by URL (`auth.perPrincipal`, or one
    shared identity) get the `/oauth/...` routes on a loopback listener (as `agentify auth` receives its redirect)."""
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    from agentify.mcp_server.server import build_server

    server = build_server(open_services, on_closed=exits.closed, questions=_questions(config))
    logger.info("agentify {} serving MCP on stdio with {} backends", __version__, len(config.backends))

    async with pipe_stdio() as pipes, AsyncExitStack() as stack:
        # On pipes the messages are read and written on the event loop; elsewhere by the SDK's threads.
        streams: tuple[Any, Any] = pipes if pipes is not None else await stack.enter_async_context(stdio_server())
        read_stream, write_stream = streams
        read = await stack.enter_async_context(answering_parse_errors(read_stream, write_stream))
        if not await read.wait_first():
            logger.info("stdin ended before the client sent anything: stopping")
            exits.closed()
            return
        exits.serving()
        if identity is not None and identity.base_url is None:
            tg = await stack.enter_async_context(background())
            await tg.start(_loopback_routes, identity)
        # tools.listChanged: with expose "tools" the gateway's tools follow the backends' (mcp_server/direct.py).
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write_stream, options)


async def serve_http(
    open_services: OpenServices,
    boot: Boot,
    host: str,
    port: int,
    token: str | None,
    identity: Authorizations | None = None,
) -> None:
    """`token`: the shared token of `server.auth` type `token` (None: `--no-auth`, or another type). `identity`:
    OAuth backends authorized by URL get the `/oauth/...` routes, in front of the bearer check."""
    import uvicorn  # here, as everything HTTP serving needs: stdio starts without it

    from agentify._common.listen import EmbeddedServer
    from agentify.mcp_server.client_requests import Questions
    from agentify.mcp_server.http_app import MCP_PATH, mcp_app
    from agentify.mcp_server.server import Clients, build_server
    from agentify.security.bodies import BodyLimit
    from agentify.security.connections import ConnectionGate
    from agentify.team.authentication import host_check, protect
    from agentify.team.bearer import RequireBearer
    from agentify.team.cancellations import CancelRelay, cancel_channel
    from agentify.team.drain import DrainGate, Replica, ReplicaRoutes
    from agentify.team.identity import Identity
    from agentify.team.metrics import METRICS_PATH, TOKEN_VARIABLE, Metrics, metrics_token
    from agentify.team.sessions import SessionCaps
    from agentify.team.shared_state import shared_state

    gc.set_threshold(YOUNG_OBJECTS, 20, 20)  # each older generation after 20 of the younger one's (default: 10)
    shared = shared_state(boot.config, os.environ)
    questions = Questions(seconds=boot.config.confirm_timeout_seconds, ledger=shared.ledger, keys=shared.keys)
    boot.redactor.add(questions.keys)
    listener = _listen(host, port)  # before anything starts: a busy port is one line, not a uvicorn log
    replica = Replica()
    scrapers = metrics_token(os.environ.get(TOKEN_VARIABLE))
    boot.redactor.add([scrapers] if scrapers else [])
    metrics = Metrics(replica, scrapers)
    audit = await _open_audit(boot)
    cancels = cancel_channel(boot.config.server.redis)  # cancels reach the replica running the call
    # A network client is not the user who started agentify: its initializationOptions change nothing
    # (not the log level either, which is the gateway's, for every client).
    server = build_server(
        open_services,
        trust_init_options=False,
        questions=questions,
        clients=Clients(one=False, replica=replica, cancels=cancels.book if cancels is not None else None),
        operations=[metrics.operation, *([audit.operation] if audit is not None else [])],
    )
    caps = SessionCaps(boot.config.server.max_sessions_per_principal, boot.config.server.session_opens_per_minute)
    mcp = mcp_app(server, host_check(host, boot.config.server), held=replica, caps=caps)
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"
    logger.info("agentify {} serving MCP on {} with {} backends", __version__, url, len(boot.config.backends))
    endpoint: Any = DrainGate(mcp, replica)
    if cancels is not None:  # in front of the drain gate: a draining replica still passes cancels on
        endpoint = CancelRelay(endpoint, cancels, mcp.state.sessions.holds, MCP_PATH)
    protected = protect(
        BodyLimit(endpoint, limit=HTTP_BODY_BYTES),
        boot.config.server,
        boot.redactor,
        lambda line: boot.logs.reveal("agentify", line),
        endpoint=url,
        shared_token=token,
    )
    if isinstance(protected.app, RequireBearer):  # a removed token ends its person's sessions
        protected.app.on_removed(mcp.state.sessions.end_principals)
        protected.app.max_open = boot.config.server.max_open_requests_per_principal
        if isinstance(identity, Identity):  # and their upstream tokens (auth.perPrincipal)
            protected.app.on_removed(identity.forget)
    public = protected.public | {METRICS_PATH: metrics.route}
    inner: Any = metrics.counting(protected.app)
    if identity is not None:
        from agentify.mcp_server.oauth_routes import OAuthRoutes

        if identity.base_url is None:
            identity.base_url = url.removesuffix(MCP_PATH)
        inner = OAuthRoutes(inner, identity)
    app = NoWebSockets(ReplicaRoutes(inner, replica, public, gate=False))
    if not is_loopback(host):
        logger.warning("serving MCP on {}: reachable from other machines; only clients with a token get in", host)
    # Connections that never send a request time out and cannot crowd out clients with the token.
    gate = ConnectionGate(limit=HTTP_CONNECTIONS)
    settings = uvicorn.Config(
        app,
        log_config=None,  # its records go to the redacting sink (LogSetup), not to its own handlers
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=gate.protocol(),
        timeout_graceful_shutdown=CLOSE_SECONDS,
        # The client's address (the 401 back-off's key) comes from X-Forwarded-For only when the peer is a
        # proxy of server.trustedProxies: uvicorn would otherwise believe any process on loopback.
        proxy_headers=bool(boot.config.server.trusted_proxies),
        forwarded_allow_ips=boot.config.server.trusted_proxies,
    )
    try:
        async with _auditing(audit), _listening(cancels):
            await _serve_until_drained(EmbeddedServer(settings), listener, replica, boot.config.server.drain_seconds)
    finally:
        await questions.aclose()


async def _open_audit(boot: Boot) -> AuditLog | None:
    """The audit chain of `server.audit`, its file taken; None without it.

    Raises:
        StartFailed: the file cannot be written, or another process writes it."""
    if boot.config.server.audit is None:
        return None
    from agentify.team.audit import AuditLog, replica_id
    from agentify.telemetry.audit_logs import audit_export

    export = audit_export(boot.telemetry.logs) if boot.telemetry.logs is not None else None
    audit = AuditLog(boot.config.server.audit, replica_id(), boot.redactor.text, export)
    await anyio.to_thread.run_sync(audit.open)
    return audit


@asynccontextmanager
async def _auditing(audit: AuditLog | None) -> AsyncIterator[None]:
    """While serving, `trust_changed` writes to `audit`; after, every line queued is written (bounded)."""
    if audit is None:
        yield
        return
    from agentify.team.audit import installed

    try:
        with installed(audit):
            yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(audit.close)


@asynccontextmanager
async def _listening(cancels: CancelChannel | None) -> AsyncIterator[None]:
    """While serving, the cancels other replicas pass on are heard (with `server.redis`)."""
    if cancels is None:
        yield
        return
    async with cancels.listening():
        yield


async def _serve_until_drained(
    server: EmbeddedServer, listener: socket.socket, replica: Replica, drain_seconds: float
) -> None:
    """Serves until SIGTERM or SIGINT, then drains (`Replica.drain`) and stops: every backend is closed by the
    app's lifespan. A second signal cuts the drain short."""
    async with anyio.create_task_group() as tg:

        async def drain_then_stop() -> None:
            await replica.drain(drain_seconds)
            server.should_exit = True

        async def on_signals(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with stop_signals() as signals:
                task_status.started()
                async for signum in signals:
                    if not replica.draining:
                        logger.info("signal {} received: draining (at most {:g} s)", signum.name, drain_seconds)
                        tg.start_soon(drain_then_stop)
                    else:
                        logger.info("signal {} received again: stopping without waiting", signum.name)
                        server.should_exit = True

        await tg.start(on_signals)
        await server.serve(sockets=[listener])
        tg.cancel_scope.cancel()


async def _loopback_routes(identity: Authorizations, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """The `/oauth/...` routes of a gateway served over stdio, on 127.0.0.1 (a free port), until cancelled."""
    import uvicorn

    from agentify._common.listen import EmbeddedServer, listening_socket
    from agentify.mcp_server.oauth_routes import OAuthRoutes

    async def nothing_else(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})

    listener = listening_socket("127.0.0.1", 0, 16)
    identity.base_url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = uvicorn.Config(
        OAuthRoutes(nothing_else, identity), log_config=None, log_level="warning", access_log=False, lifespan="off"
    )
    server = EmbeddedServer(settings)
    task_status.started()
    try:
        await server.serve(sockets=[listener])
    finally:
        listener.close()


def _questions(config: Config) -> Questions:
    from agentify.mcp_server.client_requests import Questions

    return Questions(seconds=config.confirm_timeout_seconds)


def _listen(host: str, port: int) -> socket.socket:
    """The HTTP transport's socket, bound and listening (uvicorn accepts on it), with TCP_NODELAY on every
    connection it accepts (`listening_socket`).

    Raises:
        StartFailed: the address cannot be bound (in use, not an address of this machine)."""
    from agentify._common.listen import listening_socket

    try:
        return listening_socket(host, port, HTTP_CONNECTIONS)
    except socket.gaierror as exc:
        raise StartFailed(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    except OSError as exc:
        fix = "choose another port with --port" if exc.errno == errno.EADDRINUSE else "choose another --host"
        raise StartFailed(f"cannot listen on {host}:{port} ({exc.strerror or exc}); {fix}") from None
