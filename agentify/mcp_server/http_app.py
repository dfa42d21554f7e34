"""The MCP endpoint over streamable HTTP: the SDK's session manager, except that a 2025-11-25 request is
answered with one JSON body whenever nothing but its result comes for it.

The SDK answers every request of a 2025-11-25 session with an event stream: sse-starlette's response (a
task group of four tasks and two memory streams per request) and SSE framing, which the client then
parses. That was about a third of the gateway's CPU per call over HTTP (docs/team.md, Figures). Streamable
HTTP lets the server choose either form for each request when the client accepts both, so the answer is
held back until the first message for that request:
- its result (or error) comes first: `application/json`;
- anything else comes first (a progress or log notification, or a question to the client: elicitation,
  sampling, roots): the event stream, from that message on, exactly as the SDK would have sent it;
- nothing for `QUIET_SECONDS`: the event stream too, with a keep-alive comment, and one every
  `QUIET_SECONDS` after, so neither a proxy nor a client's read timeout cuts a long call.
The SDK's own 2026-07-28 path already answers this way. What is not a request other than `initialize`
(notifications, responses, bad bodies) and transports with an event store are left to the SDK as they are.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from http import HTTPStatus
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from loguru import logger
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentify.team.bearer import principal_of
from agentify.team.principal import ANONYMOUS
from agentify.team.sessions import SessionCaps

MCP_PATH = "/mcp"
QUIET_SECONDS = 15.0  # as the SDK's 2026-07-28 path and sse-starlette's pings: below common proxy idle timeouts
_STREAM_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
]
_KEEP_ALIVE = b": ping\r\n\r\n"


def mcp_app(
    server: Server[Any],
    security: TransportSecuritySettings | None,
    held: Held | None = None,
    idle_seconds: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    caps: SessionCaps | None = None,
) -> Starlette:
    """What `server.streamable_http_app` builds (the endpoint at `MCP_PATH`, the session manager run by the
    app's lifespan, the SDK's default limits), with `QuickReplies` as every session's transport. `held` is told
    of every 2025-11-25 session from its admission until the manager discards it, which it does after
    `idle_seconds` without a request (the SDK's default). `caps`: each principal's sessions, capped
    (`team/sessions.py`); `app.state.sessions` ends principals' (`end_principals`)."""
    sessions = _Sessions(app=server, security_settings=security, session_idle_timeout=idle_seconds)
    sessions.held = held
    sessions.caps = caps
    app = Starlette(
        routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(sessions))], lifespan=lambda _: sessions.run()
    )
    app.state.sessions = sessions
    return app


class Held(Protocol):
    def opened(self, session: str) -> None: ...
    def ended(self, session: str) -> None: ...


_OPENING: ContextVar[str | None] = ContextVar("agentify.opening_session_for", default=None)


class _Sessions(StreamableHTTPSessionManager):
    held: Held | None = None
    caps: SessionCaps | None = None

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that would open a session is first counted against its principal's caps (429 past them)."""
        caps = self.caps
        if caps is None or MCP_SESSION_ID_HEADER.encode() in dict(scope.get("headers", [])):
            await super()._handle_stateful_request(scope, receive, send)
            return
        principal = principal_of(Request(scope), ANONYMOUS)
        if (refused := caps.refusal(principal)) is not None:
            why, wait = refused
            await _refused(why, wait)(scope, receive, send)
            return
        token = _OPENING.set(principal)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _OPENING.reset(token)
            caps.settled(principal)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            # The SDK builds and registers the transport here; QuickReplies adds no state, only how a POST is answered.
            transport.__class__ = QuickReplies
            if self.held is not None and transport.mcp_session_id is not None:
                self.held.opened(transport.mcp_session_id)
            principal = _OPENING.get()
            if self.caps is not None and principal is not None and transport.mcp_session_id is not None:
                self.caps.admitted(principal, transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """Every way a session ends comes here: its client's DELETE, its idle timeout, a failed opening."""
        if self.held is not None:
            self.held.ended(session_id)
        if self.caps is not None:
            self.caps.ended(session_id)
        await super()._discard_session(session_id, transport)

    def holds(self, session_id: str) -> bool:
        """Whether this process serves the 2025-11-25 session `session_id`."""
        return session_id in self._server_instances

    async def end_principals(self, principals: set[str]) -> None:
        """Ends every session these principals hold (their tokens were removed), and so their streams."""
        for principal in principals:
            for session_id in self.caps.sessions_of(principal) if self.caps is not None else []:
                transport = self._server_instances.get(session_id)
                if transport is not None:
                    await self._discard_session(session_id, transport)
            logger.info("the token of {!r} was removed: its sessions and streams are ended", principal)


def _refused(why: str, wait: int) -> Response:
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=why))
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=HTTPStatus.TOO_MANY_REQUESTS,
        media_type="application/json",
        headers={"Retry-After": str(wait)},
    )


class QuickReplies(StreamableHTTPServerTransport):
    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        message = await self._plain_request(request)
        if message is None:
            await super()._handle_post_request(scope, request, receive, send)
        elif await self._validate_request_headers(request, send):
            await self._answer(message, request, send)

    async def _plain_request(self, request: Request) -> JSONRPCRequest | None:
        """The request this POST carries, if the SDK would answer it with an event stream and no check of the
        SDK's refuses it; None for everything else, which the SDK then reads again and answers itself (the
        body is read once and kept)."""
        has_json, has_sse = check_accept_headers(request)
        if self._event_store is not None or not (has_json and has_sse) or not self._check_content_type(request):
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(json.loads(await request.body()), by_name=False)
        except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError; deep nesting recurses
            return None
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            return None
        return message

    async def _answer(self, message: JSONRPCRequest, request: Request, send: Send) -> None:
        writer = self._read_stream_writer
        assert writer is not None, "connect() runs before any request is handled"
        request_id = str(message.id)
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        # The SDK's message router puts everything for this request (by its id) on this stream.
        self._request_streams[request_id] = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        events = self._request_streams[request_id][1]
        try:
            await writer.send(self._create_session_message(message, request, request_id, version))
            try:
                first = await _next(events)
            except (anyio.EndOfStream, anyio.ClosedResourceError):  # the session ended (DELETE, idle, shutdown)
                ended = "Session terminated before the request completed"
                response = self._create_error_response(ended, HTTPStatus.INTERNAL_SERVER_ERROR, INTERNAL_ERROR)
                await response(request.scope, request.receive, send)
                return
            if first is not None and _is_answer(first):
                await self._create_json_response(first.message)(request.scope, request.receive, send)
            else:
                await self._stream(first, events, send)
        finally:
            await self._clean_up_memory_streams(request_id)

    async def _stream(
        self, first: EventMessage | None, events: MemoryObjectReceiveStream[EventMessage], send: Send
    ) -> None:
        """The event stream from `first` (None: a keep-alive) until the request's answer, or the session's end."""
        session = [(MCP_SESSION_ID_HEADER.encode(), self.mcp_session_id.encode())] if self.mcp_session_id else []
        await send({"type": "http.response.start", "status": 200, "headers": _STREAM_HEADERS + session})
        event = first
        try:
            while True:
                body = _KEEP_ALIVE if event is None else self._frame(event)
                await send({"type": "http.response.body", "body": body, "more_body": True})
                if event is not None and _is_answer(event):
                    break
                event = await _next(events)
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass  # the session ended: so does the stream, as the SDK's does
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _frame(self, event: EventMessage) -> bytes:
        """One SSE event as the SDK's stream carries it (`_create_event_data`; no `id:` without an event store).
        JSON holds no raw line breaks, so the data is one line."""
        fields = self._create_event_data(event)
        return f"event: {fields['event']}\r\ndata: {fields['data']}\r\n\r\n".encode()


async def _next(events: MemoryObjectReceiveStream[EventMessage]) -> EventMessage | None:
    """The request's next message, or None once `QUIET_SECONDS` pass without one.

    Raises:
        anyio.EndOfStream, anyio.ClosedResourceError: the session ended."""
    with anyio.move_on_after(QUIET_SECONDS):
        return await events.receive()
    return None


def _is_answer(event: EventMessage) -> bool:
    return isinstance(event.message, JSONRPCResponse | JSONRPCError)
