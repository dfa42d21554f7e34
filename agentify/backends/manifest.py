"""The tool manifest: each backend's last `tools/list`, kept in the cache dir so planning needs no running backend.

Beside the tools it keeps what else the backend offers (`offers`: capabilities, resources, templates,
prompts; `offers.py`), under a key older readers ignore; a file without it is still a valid manifest.

A manifest is keyed by a hash of how the backend is started (command, args, the names of its
env variables, url), so a changed command or URL is learnt afresh and a renamed backend is
not. Values of env variables and headers are never part of the key nor of the file. An
unreadable or stale file is ignored (and logged); writing is atomic.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import mcp_types as types
from loguru import logger
from pydantic import ValidationError

from agentify._common.dirs import user_dir
from agentify.backends.offers import Offers
from agentify.config import BackendConfig

FORMAT = 1


def cache_dir() -> Path:
    """AGENTIFY_CACHE_DIR, else the user's cache dir for agentify ($XDG_CACHE_HOME/agentify, ~/.cache/agentify)."""
    return user_dir("cache")


def manifest_key(spec: BackendConfig) -> str:
    identity = {
        "command": spec.command,
        "args": spec.args,
        "env": sorted(spec.env),
        "url": spec.url,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


class ManifestStore:
    """Reads and writes manifests under `directory`/manifests; `None` keeps nothing (tests, one-shot tools)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory / "manifests" if directory is not None else None

    def path(self, spec: BackendConfig) -> Path | None:
        return self.directory / f"{manifest_key(spec)}.json" if self.directory is not None else None

    def load(self, spec: BackendConfig) -> list[types.Tool] | None:
        """The tools last listed by this backend, or None when it was never learnt (or the file is unusable)."""
        path = self.path(spec)
        if path is None or not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                return None
            return [types.Tool.model_validate(tool) for tool in data["tools"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            logger.bind(backend=spec.id).warning("ignoring the unusable tool manifest {}: {}", path, exc)
            return None

    def load_offers(self, spec: BackendConfig) -> Offers | None:
        """What else the backend offered when last learnt, or None (never learnt, or an older manifest)."""
        data = self._read(spec)
        if data is None or data.get("offers") is None:
            return None
        try:
            return Offers.from_json(data["offers"])
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            logger.bind(backend=spec.id).warning("ignoring the unusable offers in the manifest: {}", exc)
            return None

    def save(self, spec: BackendConfig, tools: list[types.Tool]) -> None:
        """The tools, keeping the offers already in the file."""
        previous = self._read(spec) or {}
        dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
        self._write(spec, dumped, previous.get("offers"))

    def save_offers(self, spec: BackendConfig, offers: Offers) -> None:
        """The offers, beside the tools already in the file; nothing before the tools were saved (a manifest
        without tools would read as a backend that has none)."""
        previous = self._read(spec)
        if previous is not None and isinstance(previous.get("tools"), list):
            self._write(spec, previous["tools"], offers.to_json())

    def _read(self, spec: BackendConfig) -> dict[str, Any] | None:
        path = self.path(spec)
        if path is None or not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("format") == FORMAT else None

    def _write(self, spec: BackendConfig, tools: list[Any], offers: dict[str, Any] | None) -> None:
        path = self.path(spec)
        if path is None:
            return
        data = {"format": FORMAT, "backend": spec.id, "tools": tools}
        if offers is not None:
            data["offers"] = offers
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(data), encoding="utf-8")
            temporary.replace(path)
        except OSError as exc:
            logger.bind(backend=spec.id).warning("cannot write the tool manifest {}: {}", path, exc.strerror or exc)
