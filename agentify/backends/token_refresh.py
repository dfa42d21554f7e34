"""One token refresh at a time per token set, in this process.

Several OAuth providers may hold the same stored tokens: the backend's session, an extra session, the flow a person
completes from the IDE (`principal_flow.drive`) while the session starts again. When two of them refresh at once,
the server rotates the refresh token for the first and refuses the second (HTTP 400 `invalid_grant`), which would
make that provider drop its tokens and ask for a new authorization nobody needs. So a provider refreshes only
under its token set's lock, and whoever waited reads the stored tokens again first (`oauth._Provider`).
"""

from __future__ import annotations

import weakref

import anyio

_LOCKS: weakref.WeakValueDictionary[str, anyio.Lock] = weakref.WeakValueDictionary()


def refresh_lock(token_set: str) -> anyio.Lock:
    """The lock of one token set (a token file, or one person's record of a backend), shared by every provider of
    this process that holds it; kept while one of them does."""
    lock = _LOCKS.get(token_set)
    if lock is None:
        lock = _LOCKS[token_set] = anyio.Lock()
    return lock
