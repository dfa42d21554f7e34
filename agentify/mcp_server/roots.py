"""The IDE client's roots (workspace folders): they belong to the MCP session, not to the gateway.

Unknown until asked, and again after the client says they changed (`notifications/roots/list_changed`),
so a task that starts meanwhile asks for itself rather than using the old roots. The first `file://`
root is the working directory of a task whose context names none. A list learnt is handed to
`on_learnt` (the backends that forward roots).

`RootsBook` keeps them per client: over stdio there is one client, the process that started agentify,
whose roots are also what `forwardRoots` backends are told. Over HTTP many people share one gateway
and its backends: a 2025-11-25 client's roots are kept per MCP session (`Mcp-Session-Id`), a
2026-07-28 client's only for the call that asked (it has no session to keep them in: each task
without a working directory asks again, inside its own round trip), and no client's roots are told
to the shared backends, where they would become every other client's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import mcp_types as types
from loguru import logger

from agentify.mcp_server.client_requests import first_root_path


class ClientRoots:
    def __init__(self, on_learnt: Callable[[list[types.Root]], None]) -> None:
        self._on_learnt = on_learnt
        self._known: list[types.Root] | None = None

    @property
    def known(self) -> list[types.Root] | None:
        return self._known

    def learn(self, roots: list[types.Root]) -> None:
        if roots == self._known:
            return
        self._known = roots
        logger.info("client roots: {}", ", ".join(str(r.uri) for r in roots) if roots else "none known")
        self._on_learnt(roots)

    def forget(self) -> None:
        """The client said they changed: unknown until asked again."""
        self._known = None

    def working_directory(self) -> str | None:
        return first_root_path(self._known)


class RootsBook:
    """The `ClientRoots` of each client (see the module docstring)."""

    def __init__(self, on_learnt: Callable[[list[types.Root]], None], *, one_client: bool, keep: int = 10_000) -> None:
        self._one = ClientRoots(on_learnt) if one_client else None
        self._sessions: OrderedDict[str, ClientRoots] = OrderedDict()
        self._keep = keep  # as many sessions as the SDK serves at once; the oldest unused ones go first

    def of(self, request: Any) -> ClientRoots:
        """The roots of the client that sent `request` (the HTTP request the SDK hands a handler, or None)."""
        if self._one is not None:
            return self._one
        session = request.headers.get("mcp-session-id") if request is not None else None
        if not session:
            return ClientRoots(_told_to_nobody)
        roots = self._sessions.pop(session, None) or ClientRoots(_told_to_nobody)
        self._sessions[session] = roots
        while len(self._sessions) > self._keep:
            self._sessions.popitem(last=False)
        return roots


def _told_to_nobody(roots: list[types.Root]) -> None:
    """Over HTTP the backends serve everyone: one client's workspace is not theirs to be told."""
