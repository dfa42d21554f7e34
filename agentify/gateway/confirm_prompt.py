"""The text of a confirmation request: what the user is shown before a destructive call runs.

Nothing that decides where an action lands may be hidden: every argument's key is listed, values
that name a place (paths, URLs, names) and short values are shown in full, and only long values
(file contents, scripts) are cut, with their length stated. Place-like arguments come first, so a
long value can never push them out of a client's view.
"""

from __future__ import annotations

import json
import re
from typing import Any

SHORT = 200
"""Values up to this many characters are always shown whole."""
LONG_PREVIEW = 160
PATH_MAX = 4096
"""No real path or URL is longer; past this a place-like value is cut too (its length is stated)."""

_PLACE_KEY = re.compile(
    r"(?i)path|file|dir|folder|dest|source|src|target|url|uri|host|name|to$|from$|repo|branch|table|database|bucket"
)
_PLACE_VALUE = re.compile(r"^(/|~|\.{1,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)")


def confirmation_message(backend: str, tool: str, arguments: dict[str, Any], reason: str) -> str:
    lines = [f"agentify wants to run {tool} on backend {backend}.", f"Why you are asked: {reason}."]
    if arguments:
        lines.append(f"Arguments ({len(arguments)}):")
        leaves = list(_leaves(arguments))
        ordered = sorted(leaves, key=lambda item: not _is_place(*item))
        lines.extend(f"- {key}: {_show(key, value)}" for key, value in ordered)
    else:
        lines.append("No arguments.")
    lines.append("Accept to run it; decline to skip it.")
    return "\n".join(lines)


def _leaves(value: Any, prefix: str = "") -> Any:
    """Nested objects and lists as dotted keys (`files.1.path`), so a place inside one is shown like any other."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if items is None or not value:
        yield prefix, value
        return
    for key, inner in items:
        yield from _leaves(inner, f"{prefix}.{key}" if prefix else str(key))


def _is_place(key: str, value: Any) -> bool:
    return bool(_PLACE_KEY.search(key.rsplit(".", 1)[-1])) or (
        isinstance(value, str) and bool(_PLACE_VALUE.match(value))
    )


def _show(key: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    limit = PATH_MAX if _is_place(key, value) else SHORT
    if len(text) <= limit:
        return text
    shown = PATH_MAX if limit == PATH_MAX else LONG_PREVIEW
    return f"{text[:shown]} [... {len(text)} characters in all; the first {shown} shown]"
