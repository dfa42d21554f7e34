"""JSON with comments, as VS Code writes it: `//` and `/* */` comments and trailing commas.

The text is rewritten to plain JSON in one pass that knows where strings are, so a `//` inside a
URL stays, and then parsed by the standard library (its errors carry the line and column).
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/|[^"/,]+|.', re.DOTALL)
_TRAILING = re.compile(r",\s*(?:(?://[^\n]*|/\*.*?\*/)\s*)*(?=[}\]])", re.DOTALL)


def strip(text: str) -> str:
    """`text` without comments and trailing commas; strings and line numbers are kept."""
    out: list[str] = []
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token.startswith("//"):
            continue
        if token.startswith("/*"):
            out.append("\n" * token.count("\n"))  # keeps the line numbers of later errors right
        elif token == "," and _TRAILING.match(text, match.start()):
            continue
        else:
            out.append(token)
    return "".join(out)


def loads(text: str) -> Any:
    """Parses JSON with comments. Raises `json.JSONDecodeError` with the line and column."""
    return json.loads(strip(text))
