"""Where pins are kept: a file in agentify's state folder (`FileStore`), or Redis with `server.redis`
(`RedisStore`, shared by every replica). Both are synchronous: the gateway calls them from a worker
thread, the CLI directly.

Every change is a merge under the store's own lock (a lock file; a Redis transaction), never a blind
overwrite, so gateways and `agentify pins approve` may write at the same time. A running gateway
notices another process's change by `stamp()`, which changes with every write.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio

from agentify._common import files
from agentify._common.dirs import user_dir
from agentify._common.locking import try_lock
from agentify._common.private_files import private_dir, read_private, write_private
from agentify.pinning.records import BackendPins, PinStoreError, Record, Snapshot

FILE_NAME = "pins.json"
LOCK_SECONDS = 5.0
POLL_SECONDS = 0.5
"""A file says nothing when another process writes it: its stamp is compared this often."""


class PinStore(Protocol):
    where: str
    """The store's place for messages (a path, a masked URL)."""
    poll_seconds: float
    """How often a running gateway compares `stamp` when `wait_changed` has not woken it first."""

    def stamp(self) -> object:
        """A value that changes whenever anyone writes the pins (cheap: a stat, one Redis GET)."""
        ...

    def load(self) -> Snapshot:
        """Every backend's pins. Raises PinStoreError."""
        ...

    def update(
        self,
        backend: str,
        *,
        first_use: Mapping[str, Record],
        pending: Mapping[str, Record],
        settled: Collection[str],
        people: Collection[str] = (),
    ) -> None:
        """Marks `backend` as listed, records `first_use` where no tool of that name is approved yet, sets
        `pending`, drops the pending entries of `settled` and adds `people` (`BackendPins.people`). Raises
        PinStoreError."""
        ...

    def approve(self, backend: str, tools: Collection[str] | None) -> list[Record]:
        """Accepts the pending definitions of `tools` (None: all of the backend's); returns what was
        accepted. Raises PinStoreError."""
        ...

    async def wait_changed(self, seconds: float) -> None:
        """Returns when another process may have written the pins, at the latest after `seconds`."""
        ...

    def close(self) -> None: ...

    async def aclose(self) -> None:
        """`close`, and what `wait_changed` holds."""
        ...


def state_dir() -> Path:
    """Where the file store lives: `AGENTIFY_STATE_DIR`, else the platform's user state folder."""
    return user_dir("state")


class FileStore:
    """`pins.json` (0600) in a private folder, replaced atomically, changed under `pins.json.lock`."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self.where = str(directory / FILE_NAME)
        self.poll_seconds = POLL_SECONDS

    def stamp(self) -> object:
        try:
            info = os.stat(self._dir / FILE_NAME)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def load(self) -> Snapshot:
        try:
            raw = read_private(self._dir, FILE_NAME)
        except OSError as exc:
            raise PinStoreError(f"cannot read {self.where}: {exc.strerror or exc}") from None
        return self._parsed(raw)

    def update(
        self,
        backend: str,
        *,
        first_use: Mapping[str, Record],
        pending: Mapping[str, Record],
        settled: Collection[str],
        people: Collection[str] = (),
    ) -> None:
        with self._locked():
            pins = dict(self.load())
            now = pins.get(backend, BackendPins())
            approved = dict(now.approved)
            for name, record in first_use.items():
                approved.setdefault(name, record)
            waiting = {k: v for k, v in now.pending.items() if k not in settled} | dict(pending)
            pins[backend] = BackendPins(approved, waiting, now.people | frozenset(people))
            self._write(pins)

    def approve(self, backend: str, tools: Collection[str] | None) -> list[Record]:
        with self._locked():
            pins = dict(self.load())
            now = pins.get(backend, BackendPins())
            chosen = {k: v for k, v in now.pending.items() if tools is None or k in tools}
            if not chosen:
                return []
            at = time.time()
            approved = dict(now.approved) | {k: v.approved(at) for k, v in chosen.items()}
            pins[backend] = BackendPins(approved, {k: v for k, v in now.pending.items() if k not in chosen}, now.people)
            self._write(pins)
            return list(chosen.values())

    async def wait_changed(self, seconds: float) -> None:
        await anyio.sleep(seconds)  # a file says nothing: its stamp is compared after the pause

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def _parsed(self, raw: bytes | None) -> Snapshot:
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
            backends = data["backends"]
            return {
                backend: BackendPins(
                    {k: Record.from_json(v, f"{self.where}: {backend}.{k}") for k, v in entry["approved"].items()},
                    {k: Record.from_json(v, f"{self.where}: {backend}.{k}") for k, v in entry["pending"].items()},
                    frozenset(str(person) for person in entry.get("people", [])),
                )
                for backend, entry in backends.items()
            }
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise PinStoreError(
                f"{self.where} is damaged ({type(exc).__name__}: {exc}); move it away to start pinning afresh "
                "(every tool is then trusted again at its next listing)"
            ) from None

    def _write(self, pins: Snapshot) -> None:
        data: dict[str, Any] = {
            "version": 1,
            "backends": {
                backend: {
                    "approved": {k: v.as_json() for k, v in sorted(entry.approved.items())},
                    "pending": {k: v.as_json() for k, v in sorted(entry.pending.items())},
                }
                | ({"people": sorted(entry.people)} if entry.people else {})
                for backend, entry in sorted(pins.items())
            },
        }
        try:
            write_private(self._dir, FILE_NAME, json.dumps(data, indent=1).encode())
        except OSError as exc:
            raise PinStoreError(f"cannot write {self.where}: {exc.strerror or exc}") from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            private_dir(self._dir)
            flags = os.O_RDWR | os.O_CREAT | files.CLOEXEC | files.NOFOLLOW
            fd = os.open(self._dir / (FILE_NAME + ".lock"), flags, 0o600)
        except OSError as exc:
            raise PinStoreError(f"cannot lock {self.where}: {exc.strerror or exc}") from None
        try:
            deadline = time.monotonic() + LOCK_SECONDS
            while not try_lock(fd):
                if time.monotonic() > deadline:
                    raise PinStoreError(f"another process holds {self.where}.lock for over {LOCK_SECONDS:g} s")
                time.sleep(0.02)
            yield
        finally:
            os.close(fd)
