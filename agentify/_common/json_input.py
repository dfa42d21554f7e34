"""JSON a user hands agentify (its config, an IDE's MCP file, an envFile beside them), bounded in size
and in nesting: a broken or hostile file becomes a clear error, never a RecursionError in the code that
walks it afterwards (which, on a reload, would log a traceback and keep nothing but the old config)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
"""Far deeper than any MCP config needs (about 6), far shallower than Python's recursion limit."""


class TooLarge(ValueError):
    """The file is larger than `MAX_FILE_BYTES`; the message says so in words a user can act on."""


class TooDeep(ValueError):
    """The JSON nests deeper than `MAX_DEPTH`."""


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """Raises OSError, or TooLarge without reading more than `limit` + 1 bytes."""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"is larger than {limit // (1024 * 1024)} MiB, more than any config needs")
    return data


def loads(text: str) -> Any:
    """`json.loads`, refusing nesting deeper than `MAX_DEPTH`. Raises json.JSONDecodeError or TooDeep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"nests deeper than {MAX_DEPTH} levels, deeper than any config needs") from None
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise TooDeep(f"nests deeper than {MAX_DEPTH} levels, deeper than any config needs")
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return value
