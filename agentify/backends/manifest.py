"""The tool manifest: each backend's last `tools/list`, kept in the cache dir so planning needs no running backend.

A manifest is keyed by a hash of how the backend is started: command, args, its env (names and a
hash of each value), its working directory and url. So a changed command, environment or project
is learnt afresh, and a renamed backend is not. Values of env variables and headers are never
part of the file. A manifest only plans: whether a call needs the user's confirmation is decided
on the tools the running backend lists, never on this file (it lives on disk, where it can be
edited). The cache dir and its manifests/ are private to the user (`_common.private_files`). An
unreadable or stale file is ignored (and logged); writing is atomic and never follows a link.
Beside the tools it keeps what else the backend offers (`offers`: capabilities, resources, templates,
prompts; `offers.py`), under a key older readers ignore; a file without it is still a valid manifest.
It also keeps the tools' vectors for semantic search (`vectors`, by digest of the text they embed;
`_common.vectors`, made by the planner) when the model is loaded, so a lazy backend's tools rank by meaning before it
starts without being embedded again; a vector whose text changed is simply not used.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mcp_types as types
from loguru import logger
from pydantic import ValidationError

from agentify._common import vectors
from agentify._common.dirs import user_dir
from agentify._common.private_files import private_dir, read_private, write_private
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
        "env": {name: _digest(value) for name, value in spec.env.items()},
        "cwd": spec.cwd,
        "url": spec.url,
    }
    return _digest(json.dumps(identity, sort_keys=True))[:32]


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class ManifestStore:
    """Reads and writes manifests under `directory`/manifests; `None` keeps nothing (tests, one-shot tools)."""

    def __init__(self, directory: Path | None, *, writes: bool = True) -> None:
        self._cache = directory
        self.directory = directory / "manifests" if directory is not None else None
        self._writes = writes

    def read_only(self) -> ManifestStore:
        """The same manifests, never written: an extra session of a backend (`pool.py`) is another process,
        whose listing must not replace what the backend's own session recorded."""
        return ManifestStore(self._cache, writes=False)

    def path(self, spec: BackendConfig) -> Path | None:
        return self.directory / _name(spec) if self.directory is not None else None

    def load(self, spec: BackendConfig) -> list[types.Tool] | None:
        """The tools last listed by this backend, or None when it was never learnt (or the file is unusable)."""
        if self.directory is None:
            return None
        try:
            content = read_private(self.directory, _name(spec))
            if content is None:
                return None
            data = json.loads(content)
            if data.get("format") != FORMAT:
                return None
            tools = [types.Tool.model_validate(tool) for tool in data["tools"]]
            vectors.restore(data.get("vectors"))
            return tools
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            logger.bind(backend=spec.id).warning("ignoring the unusable tool manifest of {}: {}", spec.id, why)
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
        kept = vectors.keep(spec.description or "", tools)
        self._write(spec, dumped, previous.get("offers"), kept or previous.get("vectors"))

    def save_offers(self, spec: BackendConfig, offers: Offers) -> None:
        """The offers, beside the tools already in the file; nothing before the tools were saved (a manifest
        without tools would read as a backend that has none)."""
        previous = self._read(spec)
        if previous is not None and isinstance(previous.get("tools"), list):
            self._write(spec, previous["tools"], offers.to_json(), previous.get("vectors"))

    def _read(self, spec: BackendConfig) -> dict[str, Any] | None:
        if self.directory is None:
            return None
        try:
            content = read_private(self.directory, _name(spec))
            data = json.loads(content) if content is not None else None
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("format") == FORMAT else None

    def _write(self, spec: BackendConfig, tools: list[Any], offers: dict[str, Any] | None, kept: Any = None) -> None:
        if self._cache is None or self.directory is None or not self._writes:
            return
        data = {"format": FORMAT, "backend": spec.id, "tools": tools}
        if offers is not None:
            data["offers"] = offers
        if kept:
            data["vectors"] = kept
        try:
            private_dir(self._cache)
            write_private(self.directory, _name(spec), json.dumps(data).encode())
        except OSError as exc:
            why = exc.strerror or exc
            logger.bind(backend=spec.id).warning("cannot write the tool manifest of {}: {}", spec.id, why)


def _name(spec: BackendConfig) -> str:
    return f"{manifest_key(spec)}.json"
