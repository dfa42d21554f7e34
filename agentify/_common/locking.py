"""Advisory file locks between processes: the one module that uses `fcntl` (POSIX), with the
stdlib's `msvcrt` as the Windows branch. A lock is released when its descriptor is closed."""

from __future__ import annotations

import sys


def try_lock(fd: int) -> bool:
    """Takes an exclusive lock on the open file `fd` without waiting; False when another holder has it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
