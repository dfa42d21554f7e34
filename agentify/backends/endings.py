"""What the end of a backend session means for the backend: the state it enters, the error it shows, and
whether a session starts again at once, within the same start attempt.

The supervisor's owner task asks here why a ready session's link went away (`link_lost`), and, each time a
session fails to start or ends with a `SessionFailure`, what follows (`ended_by`); it applies the `Verdict`.
Nothing here touches the session or waits. A refused credential is answered by `AuthRecovery` (a refresh, or
`agentify auth <id>`, or the person's IDE asked by URL), a refused transport or era by starting again at once,
anything else fails the backend until its next start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentify.backends.auth_recovery import AuthRecovery, Refusal
from agentify.backends.calls import refused
from agentify.backends.connection import Link
from agentify.backends.failures import AuthRequired, LinkLost, SessionFailure, Unexpected, WrongEra, WrongTransport
from agentify.backends.state import BackendState
from agentify.config import BackendConfig, OAuthSettings
from agentify.errors import BackendUnavailable

if TYPE_CHECKING:
    from loguru import Logger

LIVE = (BackendState.STARTING, BackendState.RESTARTING, BackendState.READY)
"""The states a session can end in; in any other the session had already ended (idle, stopping)."""


@dataclass(frozen=True)
class Verdict:
    again: bool = False
    """Start a session again at once, within the same attempt (no restart counted, no backoff)."""
    state: BackendState | None = None
    """The state the backend enters; None: it stays in the one it is in."""
    error: str | None = None
    """The backend's last error from now on, as list_backends, doctor and the console show it; None: unchanged."""


def ended_by(
    failure: SessionFailure,
    state: BackendState,
    spec: BackendConfig,
    auth: AuthRecovery,
    log: Logger,
    *,
    by_url: bool = False,
) -> Verdict:
    """What a session's failure means for a backend in `state`; `by_url`: a call that meets a request for
    authorization asks the person from their IDE (`url_authorization.py`), so that is what the backend says."""
    if state not in LIVE:
        log.warning("closing the session failed: {}", failure)
        return Verdict()
    if isinstance(failure, WrongTransport):
        log.info("the server does not speak streamable HTTP; trying the SSE transport")
        return Verdict(again=True)
    if isinstance(failure, WrongEra):
        return Verdict(again=True, state=BackendState.STARTING)
    if isinstance(failure, AuthRequired):
        return _after_refusal(state, spec, auth, log, by_url)
    if isinstance(failure, Unexpected):  # a bug or a case nobody foresaw: keep the traceback
        log.opt(exception=failure).error("backend session failed: {}", failure)
    return failed(failure, log)


def _after_refusal(state: BackendState, spec: BackendConfig, auth: AuthRecovery, log: Logger, by_url: bool) -> Verdict:
    """The server refused the credentials (HTTP 401): refresh and start again, or say how to authorize it (an
    expected step: INFO, when the IDE is asked by URL)."""
    refusal = auth.after_refusal()
    if refusal is Refusal.WRONG_CREDENTIALS:
        return failed(refused(spec), log)
    if refusal is Refusal.REFRESH:
        log.info("the server refused the access token; refreshing it")
        return Verdict(again=True, state=BackendState.STARTING if state is BackendState.READY else None)
    if by_url:
        how = "the next call of one of its tools asks the person, from their IDE, to open a page and sign in"
        if not (isinstance(spec.auth, OAuthSettings) and spec.auth.per_principal):
            how += f" (or run `agentify auth {spec.id}`)"
        log.info("needs authorization: {}", how)
        return Verdict(state=BackendState.NEEDS_AUTH, error=f"the server asks for authorization: {how}")
    log.warning("needs authorization: run `agentify auth {}`", spec.id)
    return Verdict(
        state=BackendState.NEEDS_AUTH, error=f"the server asks for authorization: run `agentify auth {spec.id}`"
    )


async def link_lost(link: Link, stderr_hint: Callable[[], str]) -> SessionFailure:
    """Why a ready session's link went away, with what happens next (`stderr_hint`: what a process said last)."""
    if link.refused_status == 401:  # a refused SSE message: refresh, or say which credential
        return AuthRequired("the server refused the credentials")
    if link.exit_code is not None:
        code = await link.exit_code()
        return LinkLost(f"exited (code {code}); restarted on the next call. {stderr_hint()}")
    return LinkLost(f"{link.lost_reason or 'the connection closed'}; reconnected on the next call")


def failed(failure: SessionFailure | BackendUnavailable, log: Logger) -> Verdict:
    message = str(failure)
    log.warning("failed: {}", message)
    return Verdict(state=BackendState.FAILED, error=message)
