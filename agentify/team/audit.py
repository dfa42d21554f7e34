"""The audit chain (`server.audit`): one JSON line per operation a principal asked for and per change of
trust, each holding the sha256 of the line before it, so that an edited, removed or reordered line breaks
the chain (`audit_chain.verify`).

A line's fields, in this order: `time` (UTC, ISO 8601), `replica`, `principal`, `client`, `operation`,
`target`, `argsSha256` (of the arguments' RFC 8785 canonical JSON: never the values), `decision`,
`outcome`, `durationMs`, `traceId`, `prev` (the sha256 hex of the previous line's bytes without its
newline; `GENESIS` for the first line of a chain).

Nothing here blocks the event loop: `AuditLog.operation` and `trust_changed` only queue the record; one
thread hashes the arguments, chains, writes (`O_APPEND`, the file created 0600), rotates by size
(`FILE` -> `FILE.1` ... `FILE.<keep>`, the chain going on into the new file) and hands each line to the
OTLP log export. `close` writes everything queued before it returns, so no line is lost at a shutdown.
One process writes a file: it holds `FILE.lock`, and a second process that opens the same file is refused
at start (replicas sharing a folder put `{replica}` in the name).

A change of trust is recorded wherever it happens through `trust_changed(kind, target)`, which writes
to the audit this process opened (`installed`), and does nothing when there is none. The newest records
stay in memory for the console (`recent`, through `current`).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

from agentify._common import files
from agentify._common.canonical_json import canonical
from agentify._common.errors import StartFailed
from agentify._common.locking import try_lock
from agentify.config.server import AuditConfig
from agentify.team.operations import NO_ARGUMENTS, Operation
from agentify.team.principal import current_principal

GENESIS = "0" * 64
"""`prev` of a chain's first line."""
FIELDS = (
    "time",
    "replica",
    "principal",
    "client",
    "operation",
    "target",
    "argsSha256",
    "decision",
    "outcome",
    "durationMs",
    "traceId",
    "prev",
)
CLOSE_SECONDS = 10.0
RECENT = 1000
"""Records kept in memory for the console (`AuditLog.recent`)."""
_TARGET_CHARS = 2000
_STOP = object()

Export = Callable[[str, Mapping[str, Any]], None]
"""Hands one written line (and its fields) to the OTLP log export."""


def replica_id(environ: Mapping[str, str] = os.environ) -> str:
    """This replica's name in the audit: `AGENTIFY_REPLICA_ID` (scripts/team.sh numbers its replicas), else
    the host name (a Kubernetes pod's name)."""
    return environ.get("AGENTIFY_REPLICA_ID", "").strip() or socket.gethostname()


def audit_path(template: str, replica: str) -> Path:
    """The file of `server.audit.file`, with `{replica}` replaced by the replica's id (made safe for a name)."""
    return Path(template.replace("{replica}", re.sub(r"[^A-Za-z0-9._-]", "_", replica)))


class AuditLog:
    """The writer of one audit file. `mask` hides secrets in what a client named (a URI may carry one)."""

    def __init__(
        self,
        config: AuditConfig,
        replica: str,
        mask: Callable[[str], str] = lambda text: text,
        export: Export | None = None,
    ) -> None:
        self.path = audit_path(config.file, replica)
        self.replica = replica
        self._max_bytes = config.max_bytes
        self._keep = config.keep
        self._mask = mask
        self._export = export
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentify-audit", daemon=True)
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        self._prev = GENESIS
        self._lost = 0
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._recent_lock = threading.Lock()

    def open(self) -> None:
        """Takes the file (its lock), finds where its chain stands, and starts the writer.

        Raises:
            StartFailed: the file cannot be created or written, or another process writes it."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_CREAT | files.NOFOLLOW | files.CLOEXEC
            self._lock_fd = os.open(f"{self.path}.lock", flags, 0o600)
        except OSError as exc:
            raise StartFailed(f"cannot write the audit file {self.path} (server.audit.file): {exc.strerror}") from None
        if not try_lock(self._lock_fd):
            os.close(self._lock_fd)
            raise StartFailed(
                f"the audit file {self.path} is being written by another agentify process: give each replica its "
                "own file (put {replica} in server.audit.file; the replica's id is AGENTIFY_REPLICA_ID, else the "
                "host name)"
            )
        try:
            self._prev = _chain_end(self.path) or _chain_end(Path(f"{self.path}.1"), repair=False) or GENESIS
            self._open_file()
        except OSError as exc:
            os.close(self._lock_fd)
            raise StartFailed(f"cannot write the audit file {self.path} (server.audit.file): {exc}") from None
        self._thread.start()
        logger.info("auditing every operation to {} (replica {})", self.path, self.replica)

    def operation(self, done: Operation) -> None:
        """An `OperationSink`: queues the operation's line; returns at once."""
        self._queue.put(done)

    def trust_changed(self, kind: str, target: str, details: Any = NO_ARGUMENTS, principal: str | None = None) -> None:
        """A change of what is trusted (`access` reloaded, pins approved): a line whose `argsSha256` hashes
        `details` (the new rules, the approved digests), by `principal`, else the request's, else `agentify`
        (the gateway itself noticed it)."""
        self._queue.put(
            Operation(
                time=time.time(),
                method="trust",
                principal=principal or current_principal() or "agentify",
                client=None,
                operation=kind,
                target=target,
                arguments=details,
                decision="allowed",
                outcome="ok",
                duration_ms=0.0,
                trace_id=None,
            )
        )

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """At most `limit` of the newest records written, newest first (the console's audit panel)."""
        with self._recent_lock:
            newest = list(self._recent)[-limit:]
        return newest[::-1]

    def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Writes what is queued (waiting at most `seconds`), then releases the file. Blocking."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(seconds)
            if self._thread.is_alive():
                logger.error("the audit writer did not finish within {:g} s: lines still queued are lost", seconds)
                return
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                with suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = -1

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            with suppress(queue.Empty):
                while len(batch) < 512:
                    batch.append(self._queue.get_nowait())
            if _STOP in batch:
                stopping = True
                batch = [item for item in batch if item is not _STOP]
            for item in batch:
                try:
                    self._write(item)
                except Exception:  # the top of the writer's thread: one bad record must not end the audit
                    logger.exception("an audit line could not be made; it is missing from {}", self.path)
        with suppress(OSError):
            os.fsync(self._fd)

    def _write(self, done: Operation) -> None:
        fields = self._fields(done)
        line = json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        if self._size and self._size + len(line) + 1 > self._max_bytes:
            self._rotate()
        try:
            _write_all(self._fd, line + b"\n")
        except OSError as exc:
            self._lost += 1
            logger.error(
                "audit line {} could not be written to {} ({}): it is lost; the chain goes on from the last line "
                "written",
                self._lost,
                self.path,
                exc.strerror or exc,
            )
            return
        self._size += len(line) + 1
        self._prev = hashlib.sha256(line).hexdigest()
        with self._recent_lock:
            self._recent.append(fields)
        if self._export is not None:
            try:
                self._export(line.decode("ascii"), fields)
            except Exception:  # an exporter's bug costs the export, never the file
                logger.exception("an audit line could not be exported over OTLP")

    def _fields(self, done: Operation) -> dict[str, Any]:
        when = datetime.fromtimestamp(done.time, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        # What a client named (a tool, a URI, itself) is masked as the log is: a secret pasted there stays out.
        target = None if done.target is None else self._mask(done.target)[:_TARGET_CHARS]
        client = None if done.client is None else self._mask(done.client)
        arguments = None if done.arguments is NO_ARGUMENTS else _sha256(done.arguments)
        values = (
            when,
            self.replica,
            done.principal,
            client,
            self._mask(done.operation),
            target,
            arguments,
            done.decision,
            done.outcome,
            round(done.duration_ms, 2),
            done.trace_id,
            self._prev,
        )
        return dict(zip(FIELDS, values, strict=True))

    def _open_file(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | files.NOFOLLOW | files.CLOEXEC
        self._fd = os.open(self.path, flags, 0o600)
        info = os.fstat(self._fd)
        if info.st_mode & 0o077:
            os.fchmod(self._fd, 0o600)
        self._size = info.st_size

    def _rotate(self) -> None:
        """FILE -> FILE.1 -> ... -> FILE.<keep>; the oldest beyond `keep` is removed."""
        os.close(self._fd)
        self._fd = -1
        try:
            if self._keep == 0:
                os.unlink(self.path)
            else:
                with suppress(FileNotFoundError):
                    os.unlink(f"{self.path}.{self._keep}")
                for n in range(self._keep - 1, 0, -1):
                    with suppress(FileNotFoundError):
                        os.replace(f"{self.path}.{n}", f"{self.path}.{n + 1}")
                os.replace(self.path, f"{self.path}.1")
        except OSError as exc:
            logger.error("the audit file {} could not be rotated ({}): it goes on growing", self.path, exc)
        self._open_file()


def _sha256(arguments: Any) -> str | None:
    try:
        return hashlib.sha256(canonical(arguments)).hexdigest()
    except (ValueError, RecursionError):  # not JSON: it never came over the wire as such
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _chain_end(path: Path, *, repair: bool = True) -> str | None:
    """The sha256 of the last line of `path`; None when it is missing or empty. A torn last line (a crash
    while writing it) is cut when `repair`, and the chain goes on from the line before it."""
    try:
        with path.open("rb") as handle:
            data = _tail(handle)
    except FileNotFoundError:
        return None
    if not data:
        return None
    if not data.endswith(b"\n"):
        end = data.rfind(b"\n")
        if repair:
            size = path.stat().st_size
            cut = size - (len(data) - end - 1)
            logger.warning("the audit file {} ended in a torn line (a crash while writing it?): cut", path)
            os.truncate(path, cut)
        data = data[: end + 1]
        if not data:
            return None
    last = data[:-1].rsplit(b"\n", 1)[-1]
    return hashlib.sha256(last).hexdigest()


def _tail(handle: Any, chunk: int = 65536) -> bytes:
    """Enough of the end of a file to hold its last two lines' ends (or the whole file)."""
    size = handle.seek(0, os.SEEK_END)
    start = size
    data = b""
    while start > 0 and data.count(b"\n") < 2:
        start = max(0, start - chunk)
        handle.seek(start)
        data = handle.read(size - start)
    return data


_INSTALLED: list[AuditLog] = []


@contextmanager
def installed(log: AuditLog) -> Iterator[AuditLog]:
    """While inside, `trust_changed` writes to `log` (the one audit of this process)."""
    _INSTALLED.append(log)
    try:
        yield log
    finally:
        _INSTALLED.remove(log)


def current() -> AuditLog | None:
    """The audit this process writes now (`installed`), or None."""
    return _INSTALLED[-1] if _INSTALLED else None


def trust_changed(kind: str, target: str, details: Any = NO_ARGUMENTS, principal: str | None = None) -> None:
    """Records a change of trust in this process's audit, if it has one: `kind` says what changed
    (`access_reloaded`, `pins_approved`), `target` what it applies to (`server.access`, a backend or
    `<backend>__<tool>`), `details` (hashed, never written) what it changed to, `principal` who changed it
    when the request being served is not theirs (`agentify`: the gateway noticed it). Returns at once."""
    for log in _INSTALLED[-1:]:
        log.trust_changed(kind, target, details, principal)
