"""The gateway's pagination cursors: which backend a listing has reached, and that backend's own cursor.

A cursor is opaque to the IDE: base64url of `[list, backend, backend cursor]`, so a cursor of one list
(resources) is refused by another (prompts), and a backend's cursor is passed back to it unchanged.

The limits fit together: a backend's cursor is passed on only while its JSON spelling is at most
`MAX_BACKEND_CURSOR_CHARS`, so the longest cursor `encode` makes (about 5,600 characters) stays
below `MAX_CURSOR_CHARS`, the most `decode` reads.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

MAX_CURSOR_CHARS = 8192
MAX_BACKEND_CURSOR_CHARS = 4096


class BadCursor(ValueError):
    """The IDE sent a cursor this gateway did not give for this list (or gave before a restart)."""


@dataclass(frozen=True)
class Position:
    backend: str
    cursor: str | None
    """The backend's own cursor; None for its first page."""


def passable(backend_cursor: str) -> bool:
    """Whether a backend's cursor fits in a cursor of this gateway."""
    return len(json.dumps(backend_cursor)) <= MAX_BACKEND_CURSOR_CHARS


def encode(listing: str, position: Position) -> str:
    raw = json.dumps([listing, position.backend, position.cursor], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode(listing: str, cursor: str) -> Position:
    """Raises BadCursor for anything `encode(listing, ...)` did not make."""
    if len(cursor) > MAX_CURSOR_CHARS:
        raise BadCursor(f"the cursor is longer than {MAX_CURSOR_CHARS} characters")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, RecursionError) as exc:  # RecursionError: forged nesting
        raise BadCursor(f"not a cursor of this gateway ({exc.__class__.__name__})") from None
    match value:
        case [str() as kind, str() as backend, str() | None as inner] if kind == listing:
            return Position(backend, inner)
    raise BadCursor(f"not a cursor of this gateway's {listing}")
