"""Where agentify keeps files of its own: the platform's user directories, overridable for tests and users.

`AGENTIFY_CACHE_DIR`, `AGENTIFY_CONFIG_DIR` and `AGENTIFY_STATE_DIR` (absolute paths) win. Otherwise
platformdirs decides: on Linux `$XDG_CACHE_HOME/agentify` (a relative value is ignored, as the XDG
base directory spec asks), else `~/.cache/agentify`, and the same for config and state
(`~/.local/state/agentify`); macOS and Windows get their own places.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Literal

from platformdirs import PlatformDirs

APP = "agentify"


def user_dir(kind: Literal["cache", "config", "state"]) -> Path:
    """`AGENTIFY_<KIND>_DIR`, else the platform's user cache, config or state directory for agentify."""
    explicit = os.environ.get(f"AGENTIFY_{kind.upper()}_DIR")
    if explicit and os.path.isabs(explicit):
        return Path(explicit)
    dirs = PlatformDirs(APP, appauthor=False)
    if kind == "state":
        return dirs.user_state_path
    return dirs.user_cache_path if kind == "cache" else dirs.user_config_path


def runtime_dir() -> Path:
    """The user's runtime directory for agentify: `$XDG_RUNTIME_DIR/agentify` when that is a private
    directory of this user, else the platform's fallback, which platformdirs checks the same way.

    Raises:
        OSError: the fallback is not safe to use (a symbolic link, or another user's directory).
    """
    with warnings.catch_warnings():  # platformdirs warns when it falls back; a fallback is fine here
        warnings.simplefilter("ignore")
        return PlatformDirs(APP, appauthor=False).user_runtime_path
