"""`agentify audit verify`: whether audit files (team/audit.py) still form one unbroken chain.

Each line's `prev` must be the sha256 of the line before it, across files: the files are read oldest
first (`oldest_first`: `audit.jsonl.3`, `audit.jsonl.2`, `audit.jsonl.1`, `audit.jsonl`). The first
line read is taken as it is: it starts the chain (`prev` all zeros) or continues a file not given (one
rotated away). An edited line breaks the chain at the line after it, a removed line where it was, a
moved line at it or after it; the break named is the first. What a chain cannot show: lines removed
from the very end (the last line has no successor; the copies exported over OTLP do), or a whole
chain written anew by someone who can write the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentify.team.audit import GENESIS

_ROTATED = re.compile(r"^(?P<base>.+)\.(?P<n>\d+)$")


@dataclass(frozen=True)
class Break:
    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Checked:
    lines: int
    files: int
    starts: bool
    """Whether the first line starts a chain (else it continues a file not given)."""
    broken: Break | None = None


class Unreadable(Exception):
    """A file cannot be read (missing, a folder, no permission): the message names it."""


def oldest_first(paths: Sequence[Path]) -> list[Path]:
    """`paths` with each file's rotations before it, the highest number first; files of other names keep
    the order they were given in."""

    def split(path: Path) -> tuple[str, int]:
        match = _ROTATED.match(str(path))
        return (match["base"], int(match["n"])) if match else (str(path), 0)

    groups: dict[str, int] = {}
    for path in paths:
        groups.setdefault(split(path)[0], len(groups))

    def key(indexed: tuple[int, Path]) -> tuple[int, int, int]:
        position, path = indexed
        base, number = split(path)
        return (groups[base], -number, position)

    return [path for _, path in sorted(enumerate(paths), key=key)]


def verify(paths: Sequence[Path]) -> Checked:
    """Raises:
    Unreadable: a file cannot be read."""
    prev: str | None = None
    lines = 0
    starts = False
    ordered = oldest_first(paths)
    for path in ordered:
        for number, raw in _lines(path):
            lines += 1
            if not raw.endswith(b"\n"):
                return Checked(lines, len(ordered), starts, Break(path, number, "the last line is cut (no newline)"))
            line = raw[:-1]
            claimed = _prev(line)
            if claimed is None:
                reason = "not an audit record (a JSON object with a 64-digit hex prev)"
                return Checked(lines, len(ordered), starts, Break(path, number, reason))
            if prev is None:
                starts = claimed == GENESIS
            elif claimed != prev:
                reason = (
                    f"prev {claimed[:12]}... is not the sha256 of the line before it ({prev[:12]}...): "
                    "a line was edited, removed or moved here"
                )
                return Checked(lines, len(ordered), starts, Break(path, number, reason))
            prev = hashlib.sha256(line).hexdigest()
    return Checked(lines, len(ordered), starts)


def _lines(path: Path) -> Iterable[tuple[int, bytes]]:
    try:
        with path.open("rb") as handle:
            yield from enumerate(handle, 1)
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}") from None


def _prev(line: bytes) -> str | None:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    prev = record.get("prev") if isinstance(record, dict) else None
    return prev if isinstance(prev, str) and re.fullmatch(r"[0-9a-f]{64}", prev) else None
