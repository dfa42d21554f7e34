"""Why a backend session could not start, or ended: typed, so the supervisor never reads a message to decide.

    SessionFailure          `str(failure)` is what list_backends, doctor and the console show
    ├── StartTimeout        initialize and tools/list did not finish within startupTimeoutSeconds
    ├── StartRejected       the server answered the start with an error, or exited during it
    ├── Unreachable         the command cannot run, or the server cannot be reached
    ├── LinkLost            a ready session's link went away (the process exited, the server left)
    ├── Unexpected          anything nobody foresaw (a bug): the only kind logged with its traceback
    ├── AuthRequired        the server refused the credentials (HTTP 401): `AuthRecovery` decides
    ├── WrongTransport      streamable HTTP was refused in the way that means "use SSE": start again
    └── WrongEra            the session's era cannot carry the backend's questions: start again on 2025-11-25

What a transport or the SDK raises while a session opens or serves is translated in one place,
`mapped`, as httpx's `map_httpcore_exceptions` does: the connection names its own expected errors
(`Connection.failure`), everything else is `Unexpected`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentify._common.errors import first


class SessionFailure(Exception):
    """A backend session could not start or ended; the message says why and what happens next."""


class StartTimeout(SessionFailure):
    pass


class StartRejected(SessionFailure):
    pass


class Unreachable(SessionFailure):
    pass


class LinkLost(SessionFailure):
    pass


class Unexpected(SessionFailure):
    pass


class AuthRequired(SessionFailure):
    """The server refused the credentials (HTTP 401) and they could not be refreshed."""


class WrongTransport(SessionFailure):
    """A streamable-HTTP attempt was refused in a way the MCP spec says means: try the old SSE transport."""


@contextmanager
def mapped(translate: Callable[[BaseException], SessionFailure]) -> Iterator[None]:
    """Re-raises whatever the block raises as a `SessionFailure`: one found inside the exception groups
    that transports' task groups wrap around it, else `translate(exc)`. Cancellation passes untouched.
    """
    try:
        yield
    except SessionFailure:
        raise
    except Exception as exc:  # the owner task's top-level handler: a backend or transport may raise anything
        found = first(exc, SessionFailure)
        if found is not None:
            raise found from None
        raise translate(exc) from exc


class WrongEra(SessionFailure):
    """A 2026-07-28 session whose server asks by server-to-client request: reopened on 2025-11-25 (`era.py`)."""
