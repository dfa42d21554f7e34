"""Which config file `serve`, `run`, `doctor`, `eval` and `auth` use without `--config`.

`$AGENTIFY_CONFIG` counts as `--config`. Without either: `./agentify.json`, else `agentify.json` in
agentify's config directory (the user's own), else the config `agentify connect` wrote for an IDE
(`Ide.config`: the project's `.agentify/<ide>.json` in the current folder, else the user's
`<ide>.json`) when there is exactly one. The file found is said on stderr; with none, the paths
searched are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentify._common.dirs import user_dir
from agentify.cli.errors import UsageError
from agentify.connect.ides import IDES


@dataclass(frozen=True)
class Found:
    path: str | None
    """The file to load; None: no file (defaults, the environment and `initializationOptions` only)."""
    message: str | None
    """What to tell the user on stderr: the file found by the search, or the paths searched."""


def find_config(explicit: str | None) -> Found:
    """Raises:
    UsageError: no file was named and `agentify connect` wrote several (one per IDE): which one is meant?"""
    if explicit or os.environ.get("AGENTIFY_CONFIG"):
        return Found(explicit, None)  # load_sources reads AGENTIFY_CONFIG and names a missing file
    cwd, own = Path.cwd(), user_dir("config")
    for path in (cwd / "agentify.json", own / "agentify.json"):
        if path.is_file():
            return Found(str(path), f"config: {path}")
    connected = [p for p in (ide.config(place) for place in (cwd, None) for ide in IDES.values()) if p.is_file()]
    if len(connected) == 1:
        return Found(str(connected[0]), f"config: {connected[0]} (written by `agentify connect`)")
    if connected:
        raise UsageError(
            "no --config, and `agentify connect` wrote one config per IDE: "
            + ", ".join(map(str, connected))
            + "; name the one to use with --config"
        )
    ides = ",".join(IDES)
    searched = [cwd / "agentify.json", own / "agentify.json", cwd / ".agentify" / f"{{{ides}}}.json"]
    searched.append(own / f"{{{ides}}}.json")
    return Found(
        None,
        "no config file (searched "
        + ", ".join(map(str, searched))
        + "): pass --config FILE (backends.example.json is an example)",
    )
