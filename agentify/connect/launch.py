"""The command an IDE's agentify entry starts: this installation, in a form that outlives the session.

Under uvx the running script lies in uv's cache, in a throw-away environment that `uv cache clean`
deletes: the entry is then `uvx --from <what uvx installed> agentify`, which builds it again when needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any


def installed_command() -> list[str]:
    """How the IDE should start this agentify: the `agentify` script of the environment that runs now
    (a venv, pipx's), else this Python with `-m agentify`; under uvx, uvx again (`uvx_command`)."""
    called = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    script = called.resolve() if called is not None and called.name == "agentify" and called.is_file() else None
    uvx = uvx_command(script or Path(sys.executable), uv_caches(), _direct_url(), _has_console())
    if uvx is not None:
        return uvx
    if script is not None:
        return [str(script)]
    beside = Path(sys.executable).with_name("agentify.exe" if sys.platform == "win32" else "agentify")
    if beside.is_file():
        return [str(beside)]
    return [sys.executable, "-m", "agentify"]


DISTRIBUTION = "mcp-agentify"


def uv_caches() -> list[Path]:
    """Where uv keeps its cache (its storage reference): `UV_CACHE_DIR`, else `$XDG_CACHE_HOME/uv` or
    `~/.cache/uv`, on Windows `%LOCALAPPDATA%\\uv\\cache`."""
    found = [os.environ.get("UV_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME") and f"{os.environ['XDG_CACHE_HOME']}/uv"]
    found += [str(Path.home() / ".cache" / "uv")]
    if os.environ.get("LOCALAPPDATA"):
        found.append(str(Path(os.environ["LOCALAPPDATA"]) / "uv" / "cache"))
    return [Path(p).expanduser().resolve() for p in found if p]


def uvx_command(
    running: Path, caches: list[Path], direct_url: dict[str, Any] | None, console: bool
) -> list[str] | None:
    """`uvx --from <what uvx installed> agentify` when `running` lies in uv's cache (uvx's throw-away
    environments, gone after `uv cache clean`), else None. `direct_url` is the install's PEP 610 record:
    a wheel, a folder or a git URL; without one, the distribution from the index."""
    if not any(running.is_relative_to(cache) for cache in caches):
        return None
    name = DISTRIBUTION + ("[console]" if console else "")
    url = (direct_url or {}).get("url")
    if isinstance(url, str) and url:
        vcs = (direct_url or {}).get("vcs_info")
        if isinstance(vcs, dict):
            revision = vcs.get("requested_revision")
            url = f"{vcs.get('vcs', 'git')}+{url}" + (f"@{revision}" if revision else "")
        name = f"{name} @ {url}"
    uvx = shutil.which("uvx") or "uvx"
    return [uvx, "--from", name, "agentify"]


def _direct_url() -> dict[str, Any] | None:
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        data = json.loads(text) if text else None
    except (metadata.PackageNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _has_console() -> bool:
    return importlib.util.find_spec("fastapi") is not None
