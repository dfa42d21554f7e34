"""Where agentify keeps files of its own: the XDG base directories, overridable for tests and users."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal


def user_dir(kind: Literal["cache", "config"], environ: Mapping[str, str] | None = None) -> Path:
    """`AGENTIFY_<KIND>_DIR`, else `$XDG_<KIND>_HOME/agentify`, else `~/.<kind>/agentify`.

    Relative values are ignored, as the XDG base directory spec asks."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(f"AGENTIFY_{kind.upper()}_DIR")
    if explicit and os.path.isabs(explicit):
        return Path(explicit)
    xdg = environ.get(f"XDG_{kind.upper()}_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "agentify"
    return Path.home() / f".{kind}" / "agentify"
