"""The IDE client's roots (workspace folders): they belong to the MCP session, not to the gateway.

Unknown until asked, and again after the client says they changed (`notifications/roots/list_changed`),
so a task that starts meanwhile asks for itself rather than using the old roots. The first `file://`
root is the working directory of a task whose context names none. A list learnt is handed to
`on_learnt` (the backends that forward roots). Over stdio one client session is served; per-session
roots over HTTP keep one `ClientRoots` per session.
"""

from __future__ import annotations

from collections.abc import Callable

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
