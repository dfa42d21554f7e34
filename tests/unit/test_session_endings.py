"""What the end of a backend session means (`endings.py`): the state the backend enters, the error a user then
sees in list_backends, and whether a session starts again at once; the refresh is arranged on the `Connection`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from loguru import logger

from agentify.backends.auth_recovery import AuthRecovery
from agentify.backends.connection import Link
from agentify.backends.endings import Verdict, ended_by, link_lost
from agentify.backends.failures import (
    AuthRequired,
    LinkLost,
    SessionFailure,
    StartTimeout,
    Unexpected,
    Unreachable,
    WrongEra,
    WrongTransport,
)
from agentify.backends.state import BackendState
from agentify.config import BackendConfig
from tests.fakes.memory_connection import MemoryConnection

STARTING, READY, FAILED = BackendState.STARTING, BackendState.READY, BackendState.FAILED
RESTARTING, IDLE, NEEDS_AUTH = BackendState.RESTARTING, BackendState.IDLE, BackendState.NEEDS_AUTH
LOG = logger.bind(backend="mem")
PLAIN = BackendConfig.model_validate({"id": "mem", "url": "http://127.0.0.1:9/mcp"})
OAUTH = BackendConfig.model_validate({"id": "mem", "url": "http://127.0.0.1:9/mcp", "auth": {"type": "oauth"}})
PER_PERSON = BackendConfig.model_validate(
    {"id": "mem", "url": "http://127.0.0.1:9/mcp", "auth": {"type": "oauth", "perPrincipal": True}}
)


def ending(failure: SessionFailure, state: BackendState, spec: BackendConfig = PLAIN) -> Verdict:
    return ended_by(failure, state, spec, AuthRecovery(spec, MemoryConnection()), LOG)


@pytest.mark.parametrize("state", [STARTING, RESTARTING, READY])
@pytest.mark.parametrize(
    "failure",
    [
        LinkLost("the server left; reconnected on the next call"),
        StartTimeout("did not finish initialize and tools/list within 5 s"),
        Unreachable("cannot connect to http://127.0.0.1:9/mcp"),
        Unexpected("unexpected failure: RuntimeError: boom"),
    ],
)
def test_a_failed_session_fails_the_backend_and_shows_why(failure: SessionFailure, state: BackendState) -> None:
    assert ending(failure, state) == Verdict(state=FAILED, error=str(failure))


def test_a_refused_transport_starts_again_at_once_in_the_same_state() -> None:
    assert ending(WrongTransport(), STARTING) == Verdict(again=True)


def test_a_refused_era_starts_a_new_session_at_once_and_shows_the_backend_starting() -> None:
    assert ending(WrongEra("reopening the session in the 2025-11-25 protocol"), READY) == Verdict(
        again=True, state=STARTING
    )


@pytest.mark.parametrize("state", [IDLE, FAILED, NEEDS_AUTH, BackendState.STOPPED])
def test_a_session_that_had_already_ended_changes_nothing_when_closing_it_fails(state: BackendState) -> None:
    assert ending(LinkLost("the server left"), state) == Verdict()
    assert ending(AuthRequired(), state) == Verdict()


def test_a_401_without_oauth_fails_naming_the_headers_and_token_to_check() -> None:
    verdict = ending(AuthRequired(), STARTING)
    assert verdict.state is FAILED and not verdict.again
    assert verdict.error is not None and "refused the credentials (HTTP 401)" in verdict.error
    assert "check its headers and auth.token" in verdict.error


def test_an_oauth_401_refreshes_once_per_ready_session_then_asks_for_agentify_auth() -> None:
    connection = MemoryConnection()
    auth = AuthRecovery(OAUTH, connection)
    assert ended_by(AuthRequired(), READY, OAUTH, auth, LOG) == Verdict(again=True, state=STARTING)
    assert connection.refreshes == 1
    needs_auth = Verdict(state=NEEDS_AUTH, error="the server asks for authorization: run `agentify auth mem`")
    assert ended_by(AuthRequired(), STARTING, OAUTH, auth, LOG) == needs_auth
    assert connection.refreshes == 1, "one refresh per ready session"

    auth.session_ready()
    assert ended_by(AuthRequired(), STARTING, OAUTH, auth, LOG) == Verdict(again=True)  # already starting
    assert connection.refreshes == 2


def test_an_oauth_401_that_cannot_be_refreshed_asks_for_agentify_auth_at_once() -> None:
    connection = MemoryConnection()
    connection.refreshable = False
    verdict = ended_by(AuthRequired(), READY, OAUTH, AuthRecovery(OAUTH, connection), LOG)
    assert verdict == Verdict(state=NEEDS_AUTH, error="the server asks for authorization: run `agentify auth mem`")


async def lost(stderr_hint: Callable[[], str], **fields: object) -> SessionFailure:
    """`link_lost` of a link with these `fields`."""
    send, receive = anyio.create_memory_object_stream[object](1)
    with send, receive:
        return await link_lost(Link(read_stream=receive, write_stream=send, **fields), stderr_hint)  # type: ignore[arg-type]


def exited(code: int | None) -> Callable[[], Awaitable[int | None]]:
    async def exit_code() -> int | None:
        return code

    return exit_code


@pytest.mark.anyio
async def test_a_link_gone_says_why_and_what_happens_next() -> None:
    def hint() -> str:
        return "stderr said: boom"

    failure = await lost(hint, exit_code=exited(3))
    assert isinstance(failure, LinkLost)
    assert str(failure) == "exited (code 3); restarted on the next call. stderr said: boom"
    failure = await lost(hint, lost_reason="the server closed the stream")
    assert str(failure) == "the server closed the stream; reconnected on the next call"
    assert str(await lost(hint)) == "the connection closed; reconnected on the next call"
    assert isinstance(await lost(hint, refused_status=401, lost_reason="401"), AuthRequired)


def test_an_oauth_401_says_the_ide_asks_when_authorization_by_url_is_set_up() -> None:
    """Logged at INFO (an expected step), and what list_backends shows says what happens: the IDE is asked."""
    heard: list[tuple[str, str]] = []
    sink = logger.add(lambda message: heard.append((message.record["level"].name, message.record["message"])))
    try:
        for spec in (OAUTH, PER_PERSON):
            connection = MemoryConnection()
            connection.refreshable = False
            verdict = ended_by(AuthRequired(), READY, spec, AuthRecovery(spec, connection), LOG, by_url=True)
            assert verdict.state is NEEDS_AUTH and verdict.error is not None
            assert "asks the person, from their IDE, to open a page and sign in" in verdict.error, verdict.error
            assert ("`agentify auth mem`" in verdict.error) is (spec is OAUTH), verdict.error
    finally:
        logger.remove(sink)
    assert [level for level, text in heard if "authorization" in text] == ["INFO", "INFO"], heard
