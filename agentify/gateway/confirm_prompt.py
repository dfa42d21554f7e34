"""The text of a confirmation request: what the user is shown before a destructive call runs.

Nothing that decides where an action lands may be hidden or disguised:
- every argument's key is listed; place-like arguments (paths, URLs, names) come first, so a long
  value can never push them out of a client's view;
- a path is shown where it lands (`normpath`: `scratch/x/../../IMPORTANT.txt` is `IMPORTANT.txt`),
  with what was written beside it when that differs; a URL is shown with the host it goes to;
- a place too long to show whole is never asked about (`unshowable`): the call is refused;
- other long values (file contents, scripts) show their head and their tail, with their length;
- control, format and bidi characters are escaped everywhere (`\\n`, `\\u202e`), so a value can
  neither fake another line of the prompt nor reorder what is shown.
"""

from __future__ import annotations

import json
import ntpath
import posixpath
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from agentify.security.display import escaped

SHORT = 200
"""Values up to this many characters are always shown whole."""
HEAD = TAIL = 80
PLACE_MAX = 4096
"""No real path is longer (Linux's PATH_MAX); a place longer than this, normalised, is not asked about."""
HOST_MAX = 253

_PLACE_KEY = re.compile(
    r"(?i)path|file|dir|folder|dest|source|src|target|url|uri|host|name|to$|from$|repo|branch|table|database|bucket"
)
_URL = re.compile(r"[a-z][a-z0-9+.-]{0,31}://", re.IGNORECASE)
_WINDOWS_PATH = re.compile(r"[A-Za-z]:\\")
_PLACE_VALUE = re.compile(r"/|~|\.{1,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]{0,31}://", re.IGNORECASE)


def confirmation_message(backend: str, tool: str, arguments: dict[str, Any], reason: str) -> str:
    lines = [f"agentify wants to run {escaped(tool)} on backend {escaped(backend)}.", f"Why you are asked: {reason}."]
    if arguments:
        lines.append(f"Arguments ({len(arguments)}):")
        ordered = sorted(_leaves(arguments), key=lambda item: not _is_place(*item))
        lines.extend(f"- {escaped(key)}: {_show(key, value)}" for key, value in ordered)
    else:
        lines.append("No arguments.")
    lines.append("Accept to run it; decline to skip it.")
    return "\n".join(lines)


def unshowable(arguments: dict[str, Any]) -> str | None:
    """Why a confirmation of these arguments cannot show where the call lands, or None when it can."""
    for key, value in _leaves(arguments):
        if not (isinstance(value, str) and _is_place(key, value)):
            continue
        if _URL.match(value):
            host = urlsplit(value).hostname or ""
            if len(host) > HOST_MAX:
                return f"the host of {key} is {len(host)} characters long"
        elif len(shown := _normalised(value)) > PLACE_MAX:
            return f"{key} names a place {len(shown)} characters long (the limit is {PLACE_MAX})"
    return None


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
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


def _normalised(path: str) -> str:
    return ntpath.normpath(path) if _WINDOWS_PATH.match(path) else posixpath.normpath(path) if path else path


def _show(key: str, value: Any) -> str:
    if not isinstance(value, str):
        return _cut(json.dumps(value, ensure_ascii=False))
    if not _is_place(key, value):
        return _cut(value)
    if _URL.match(value):
        return f"host {escaped(urlsplit(value).hostname or '(none)')}: {_cut(value)}"
    where = _normalised(value)
    if where == value:
        return escaped(value)
    return f"{escaped(where)} (written as {_cut(value)})"


def _cut(text: str) -> str:
    if len(text) <= SHORT:
        return escaped(text)
    return f"{escaped(text[:HEAD])} [... {len(text)} characters in all ...] {escaped(text[-TAIL:])}"
