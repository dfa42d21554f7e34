"""What a refused credential (HTTP 401) leads to, apart from the supervisor's lifecycle.

An OAuth backend gets one token refresh per ready session (the SDK refreshes when the next session
starts); when that does not help either, it needs a new authorization (`agentify auth <id>`), and
nothing is tried again until the stored credentials change. For any other backend a 401 means its
headers or token are wrong.
"""

from __future__ import annotations

import enum

from agentify.backends.connection import Connection, Link
from agentify.config import BackendConfig


class Refusal(enum.Enum):
    REFRESH = "refresh"  # a refreshed token may help: start again at once
    NEEDS_AUTH = "needs_auth"  # only `agentify auth <id>` helps
    WRONG_CREDENTIALS = "wrong_credentials"  # not an OAuth backend: its headers or token are wrong


class AuthRecovery:
    def __init__(self, spec: BackendConfig, connection: Connection) -> None:
        self._spec = spec
        self._connection = connection
        self._refresh_tried = False
        self._stamp = 0.0

    def session_ready(self) -> None:
        """A session is ready: a later refusal may be answered by a refresh again."""
        self._refresh_tried = False

    def after_refusal(self) -> Refusal:
        """What to do now that the server refused the credentials; arranges the refresh it answers."""
        if not self._spec.oauth:
            return Refusal.WRONG_CREDENTIALS
        if not self._refresh_tried and self._connection.retry_auth():
            self._refresh_tried = True
            return Refusal.REFRESH
        self._stamp = self._connection.auth_stamp()
        return Refusal.NEEDS_AUTH

    def has_new_credentials(self) -> bool:
        """Whether the stored credentials changed since the backend was found to need authorization."""
        return self._connection.auth_stamp() != self._stamp

    def call_may_be_retried(self, link: Link) -> bool:
        """A call refused with 401 by an OAuth server: once the session restarts with a refreshed token,
        the call can run (the server refused it before running it)."""
        return self._spec.oauth and link.refused_status == 401
