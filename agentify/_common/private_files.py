"""Files only this user can plant or read: the OAuth tokens, the tool manifests and the cache they live in.

A private directory is a real directory (not a symbolic link) owned by this user, mode 0700: one
that is missing is created so, one of ours that others may enter is tightened. Files in it are
opened relative to the directory's own descriptor with `O_NOFOLLOW`, so a symbolic link planted
where a file is expected is never followed, and only regular files of this user are read. A write
goes to a new temporary file (`O_EXCL`, mode 0600) that is then renamed over the old one, so a
reader sees the old content or the new, never a part.

Raises `OSError` with a message that names the path and what is wrong with it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from agentify._common import files

_DIR_FLAGS = os.O_RDONLY | files.DIRECTORY | files.NOFOLLOW | files.CLOEXEC


def private_dir(directory: Path) -> None:
    """Creates `directory` (and missing parents) with mode 0700, or checks and tightens the existing one.

    Raises:
        OSError: it is a symbolic link or not a directory, or belongs to another user.
    """
    os.close(_open_dir(directory, create=True))


def read_private(directory: Path, name: str) -> bytes | None:
    """The content of `directory/name`, or None when either is missing.

    Raises:
        OSError: the directory is not private to this user, or the file is a symbolic link, not a
            regular file, or another user's.
    """
    try:
        dir_fd = _open_dir(directory, create=False)
    except FileNotFoundError:
        return None
    try:
        try:
            fd = os.open(name, os.O_RDONLY | files.NOFOLLOW | files.CLOEXEC | files.NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _named(exc, directory / name) from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                raise OSError(errno.EPERM, f"{directory / name} is not a regular file of this user")
            return handle.read()
    finally:
        os.close(dir_fd)


def write_private(directory: Path, name: str, data: bytes) -> None:
    """Replaces `directory/name` with `data` (mode 0600) atomically, creating the directory private if needed.

    Raises:
        OSError: the directory is not private to this user, or cannot be written.
    """
    dir_fd = _open_dir(directory, create=True)
    temporary = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | files.NOFOLLOW | files.CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def _open_dir(directory: Path, *, create: bool) -> int:
    """A descriptor of `directory`, checked on the descriptor itself (so nothing swapped in between counts).

    Raises:
        FileNotFoundError: it is missing and `create` is off.
        OSError: it is a symbolic link or not a directory, or belongs to another user.
    """
    if create:
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:  # OSError(ENOENT, ...) is a FileNotFoundError again
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, f"{directory} is a symbolic link or not a directory") from None
        raise _named(exc, directory) from None
    info = os.fstat(fd)
    if info.st_uid != os.getuid():
        os.close(fd)
        raise OSError(errno.EPERM, f"{directory} belongs to uid {info.st_uid}, not to this user ({os.getuid()})")
    if info.st_mode & 0o077:
        os.fchmod(fd, 0o700)
    return fd


def _named(exc: OSError, path: Path) -> OSError:
    if exc.errno == errno.ELOOP:
        return OSError(exc.errno, f"{path} is a symbolic link")
    return OSError(exc.errno, f"{path}: {exc.strerror or exc}")
