"""The connection of a backend that cannot start as configured (a variable it uses is not set): every
attempt fails at once with the config's message, so the backend shows as failed with it while the
others serve. A config reload that fixes it gives the backend a real connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentify.backends.connection import Link
from agentify.backends.failures import SessionFailure, Unexpected, Unreachable
from agentify.config import BackendConfig


class Misconfigured:
    kind = "config"

    def __init__(self, spec: BackendConfig, problem: str) -> None:
        self._problem = problem
        self._spec = spec

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Link]:
        raise Unreachable(f"not started: {self._problem}")
        yield  # pragma: no cover - never reached; makes this an async generator

    def fall_back(self) -> bool:
        return False

    def retry_auth(self) -> bool:
        return False

    def auth_stamp(self) -> float:
        return 0.0

    def failure(self, exc: BaseException) -> SessionFailure:
        return Unexpected(f"unexpected failure: {type(exc).__name__}: {exc}")
