"""Open flags that only POSIX has, named once: the one module that reads them from `os`.

On Windows each is 0, which costs nothing there: Python makes every descriptor non-inheritable
already (PEP 446), there are no FIFOs to block on, and the checks that use `NOFOLLOW` and
`DIRECTORY` against symbolic links also look at the opened file itself (`fstat`).
"""

from __future__ import annotations

import os

CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
"""Not inherited by children, atomically (the runner and the gateway spawn processes all the time)."""
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
"""Refuse a symbolic link as the last path component."""
NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
"""Do not hang opening a FIFO someone put where a file was expected."""
DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
"""Only a directory will do (for a descriptor that later opens files relative to it)."""
