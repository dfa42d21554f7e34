"""Writing the files `connect` touches, atomically, and keeping what `--undo` restores.

A write goes to a temporary file beside the target (mode 0600 from its creation, so a secret is
never readable by others, not even for a moment), is flushed to disk and renamed over the target:
an interrupted write leaves the old file whole.

Each connection keeps one record in agentify's config directory (`connect/<hash of the IDE file's
path>/`): the exact bytes and modes both files had before, and the digests of what was written,
so `--undo` can tell whether someone edited a file since, and keep that edit aside.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agentify._common.dirs import user_dir
from agentify.connect import ConnectError

SECRET_MODE = 0o600


def write_atomic(path: Path, data: bytes, mode: int = SECRET_MODE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConnectError(f"cannot read {path}: {exc.strerror}") from None


def mode_of(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Kept:
    """One file as it was before a connection, and what the connection wrote there."""

    path: str
    mode: int | None
    """None: the file did not exist, and `--undo` removes it."""
    written: str | None


@dataclass(frozen=True)
class Record:
    ide: str
    ide_file: Kept
    config_file: Kept
    at: float

    @property
    def folder(self) -> Path:
        return folder_for(Path(self.ide_file.path))


def connections() -> Path:
    return user_dir("config") / "connect"


def folder_for(ide_file: Path) -> Path:
    return connections() / hashlib.sha256(str(ide_file).encode()).hexdigest()[:16]


def keep(record: Record, ide_before: bytes | None, config_before: bytes | None) -> None:
    """Stores the record and both files' former bytes (0600: they may hold the servers' secrets)."""
    folder = record.folder
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, before in (("ide", ide_before), ("config", config_before)):
        if before is not None:
            write_atomic(folder / name, before)
    write_atomic(folder / "record.json", json.dumps(asdict(record), indent=2).encode())


def load(ide_file: Path) -> Record | None:
    return _load(folder_for(ide_file))


def all_records() -> list[Record]:
    folders = sorted(connections().iterdir()) if connections().is_dir() else []
    return sorted((r for r in map(_load, folders) if r is not None), key=lambda r: r.at)


def _load(folder: Path) -> Record | None:
    data = read(folder / "record.json")
    if data is None:
        return None
    try:
        raw = json.loads(data)
        return Record(raw["ide"], Kept(**raw["ide_file"]), Kept(**raw["config_file"]), raw["at"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConnectError(f"the backup record {folder}/record.json is damaged ({exc})") from None


def restore(record: Record) -> list[str]:
    """Puts both files back as they were; an edit made since the connection is kept beside the file.

    Returns one line per file for the user."""
    kept_files = (("ide", record.ide_file), ("config", record.config_file))
    backups = {name: read(record.folder / name) for name, kept in kept_files if kept.mode is not None}
    missing = [name for name, data in backups.items() if data is None]
    if missing:
        raise ConnectError(f"the backup in {record.folder} is incomplete ({', '.join(missing)}); nothing was changed")
    lines = []
    for name, kept in kept_files:
        path = Path(kept.path)
        now = read(path)
        if now is not None and digest(now) != kept.written:
            aside = path.with_name(f"{path.name}.before-undo-{time.strftime('%Y%m%d-%H%M%S')}")
            write_atomic(aside, now)
            lines.append(f"{path} was edited after `agentify connect`: that version is kept as {aside}")
        if kept.mode is None:
            path.unlink(missing_ok=True)
            lines.append(f"removed {path} (it did not exist before)")
        else:
            write_atomic(path, backups[name] or b"", kept.mode)
            lines.append(f"restored {path}")
    for name in ("ide", "config", "record.json"):
        (record.folder / name).unlink(missing_ok=True)
    record.folder.rmdir()
    return lines
