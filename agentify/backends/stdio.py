"""The stdio connection: a local backend process, through `agentify.backends.stdio_process`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from agentify.backends.connection import Link
from agentify.backends.environment import backend_environment, personal_env
from agentify.backends.failures import SessionFailure, Unexpected, Unreachable
from agentify.backends.stderr_log import StderrLog
from agentify.backends.stdio_process import spawn_backend
from agentify.config import BackendConfig

EXIT_STATUS_WAIT = 1.0  # how long an error message waits for the exit code of a process whose stdout closed


class StdioConnection:
    kind = "stdio"

    def __init__(self, spec: BackendConfig, stderr: StderrLog, secrets: Mapping[str, str] | None = None) -> None:
        """`secrets`: one person's own secrets, for the `${person:NAME}` of `env` (`personal.py`)."""
        assert spec.command is not None
        self._command = spec.command
        self._spec = spec
        self._stderr = stderr
        self._secrets = secrets

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Link]:
        spec = self._spec
        env = backend_environment(personal_env(spec.env, self._secrets), spec.inherit_env or False)
        async with spawn_backend(self._command, spec.args, env, spec.cwd, self._stderr.line) as process:

            async def exit_code() -> int | None:
                return await process.wait_exit(EXIT_STATUS_WAIT)

            link = Link(
                read_stream=process.read_stream,
                write_stream=process.write_stream,
                gone=process.stdout_closed,
                pid=process.pid,
                exit_code=exit_code,
            )
            yield link

    def fall_back(self) -> bool:
        return False

    def retry_auth(self) -> bool:
        return False

    def auth_stamp(self) -> float:
        return 0.0

    def failure(self, exc: BaseException) -> SessionFailure:
        if isinstance(exc, OSError):  # raised by the spawn itself, before any task group
            return Unreachable(f"cannot start {self._command!r}: {exc.strerror or exc} (cwd {self._spec.cwd})")
        return Unexpected(f"unexpected failure: {type(exc).__name__}: {exc}")
