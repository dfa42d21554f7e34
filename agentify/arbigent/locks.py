"""One run at a time per working directory: within this process and across runner processes.

Arbigent overwrites `arbigent-result/result.yml` on every run, so overlapping runs in one directory
would report each other's results. Runner processes of one user agree through a lock file per
directory, kept in a private directory: the user's runtime dir (`$XDG_RUNTIME_DIR/agentify`, else the
platform's fallback), else the user's cache dir (`$AGENTIFY_CACHE_DIR`, `$XDG_CACHE_HOME/agentify` or
`~/.cache/agentify`), in `arbigent-locks/`
with mode 0700, whose parent belongs to the user and is writable by nobody else. Nobody else can
create, replace or hold a file there, and the lock file is opened
relative to the directory's own descriptor with `O_NOFOLLOW`, so a symbolic link is never followed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path

import anyio

from agentify._common import files
from agentify._common.dirs import runtime_dir, user_dir
from agentify._common.locking import try_lock
from agentify.arbigent.errors import StartupError, ToolCallError

LOCK_DIR_NAME = "arbigent-locks"
_LOCK_POLL_SECONDS = 0.2


def private_lock_dir() -> Path:
    """The first usable private directory for lock files, created (mode 0700) when missing.

    Raises:
        StartupError: no candidate is a directory owned by this user that others cannot enter.
    """
    problems = []
    for base in _candidates():
        directory = base / LOCK_DIR_NAME
        try:
            _make_safe(base, private=False)
            _make_safe(directory, private=True)
        except OSError as exc:
            problems.append(f"{directory}: {exc.strerror or exc}")
            continue
        return directory
    raise StartupError("no private directory for the run locks: " + "; ".join(problems))


def _candidates() -> list[Path]:
    found = []
    with suppress(OSError):
        found.append(runtime_dir())
    found.append(user_dir("cache"))
    return found


def _make_safe(directory: Path, *, private: bool) -> None:
    """Creates `directory` (mode 0700) or checks the existing one: a real directory of this user that
    nobody else can write to (`private`: nor enter). A directory of ours that is too open is closed.

    Raises:
        OSError: it is a symbolic link or not a directory, or belongs to someone else.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise OSError(errno.ENOTDIR, "not a directory (or a symbolic link)")
    if info.st_uid != os.getuid():
        raise OSError(errno.EPERM, f"owned by uid {info.st_uid}, not by this user ({os.getuid()})")
    too_open = 0o077 if private else 0o022
    if info.st_mode & too_open:
        os.chmod(directory, stat.S_IMODE(info.st_mode) & ~too_open)


class WorkdirLocks:
    """Queues runs per working directory (see the module docstring)."""

    def __init__(self, lock_dir: Path | None = None) -> None:
        self._lock_dir = lock_dir
        self._locks: dict[Path, anyio.Lock] = {}

    @asynccontextmanager
    async def hold(
        self, directory: Path, on_queued: Callable[[], Awaitable[None]], *, time_limit: float
    ) -> AsyncIterator[None]:
        """Holds `directory` (an absolute, resolved path) for one run; awaits `on_queued` first if
        another run holds it.

        Raises:
            ToolCallError: the directory stayed busy for more than `time_limit` seconds, or the lock
                file cannot be opened safely.
        """
        lock = self._locks.setdefault(directory, anyio.Lock())
        async with AsyncExitStack() as held:
            try:
                with anyio.fail_after(time_limit):
                    if not _try_acquire(lock):
                        await on_queued()
                        on_queued = _nothing
                        await lock.acquire()
                    held.callback(lock.release)
                    fd = self._open_lock_file(directory)
                    held.callback(os.close, fd)
                    while not try_lock(fd):
                        await on_queued()
                        on_queued = _nothing
                        await anyio.sleep(_LOCK_POLL_SECONDS)
            except TimeoutError:
                raise ToolCallError(
                    f"another arbigent run kept {directory} busy for more than {time_limit:g} s; try again later"
                ) from None
            yield

    def _open_lock_file(self, directory: Path) -> int:
        """The lock file of `directory`, opened without following any symbolic link.

        Raises:
            ToolCallError: the private directory or the lock file is not what it must be.
        """
        try:
            lock_dir = self._lock_dir or private_lock_dir()
        except StartupError as exc:
            raise ToolCallError(str(exc)) from None
        self._lock_dir = lock_dir
        name = lock_file_name(directory)
        try:
            dir_fd = os.open(lock_dir, os.O_RDONLY | files.DIRECTORY | files.NOFOLLOW | files.CLOEXEC)
        except OSError as exc:
            raise ToolCallError(f"cannot open the lock directory {lock_dir}: {exc.strerror or exc}") from None
        try:
            info = os.fstat(dir_fd)
            if info.st_uid != os.getuid() or info.st_mode & 0o077:
                raise ToolCallError(f"the lock directory {lock_dir} is not private to this user (mode 0700)")
            flags = os.O_RDWR | os.O_CREAT | files.NOFOLLOW | files.CLOEXEC | files.NONBLOCK
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            raise ToolCallError(f"cannot open the lock file {lock_dir / name}: {why}") from None
        finally:
            os.close(dir_fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolCallError(f"the lock file {lock_dir / name} is not a regular file")
        return fd


def lock_file_name(directory: Path) -> str:
    """The lock file's name for a working directory (an absolute, resolved path)."""
    return hashlib.sha256(str(directory).encode()).hexdigest()[:32] + ".lock"


async def _nothing() -> None:
    pass


def _try_acquire(lock: anyio.Lock) -> bool:
    try:
        lock.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True
