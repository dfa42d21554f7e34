"""JSON with comments, as VS Code writes it: `//` and `/* */` comments and trailing commas.

The text is rewritten to plain JSON in one linear pass that knows where strings are (so a `//`
inside a URL stays), and then parsed by the standard library, whose errors carry the line and
column: a block comment is replaced by its line breaks, so those stay right.
"""

from __future__ import annotations

from typing import Any

from agentify._common import json_input


def strip(text: str) -> str:
    """`text` without comments and trailing commas."""
    out: list[str] = []
    comma: int | None = None  # where in `out` the last comma stands while only blanks follow it
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            comma, i = None, end + 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        if char in "}]" and comma is not None:
            out[comma] = ""
        if char == ",":
            comma = len(out)
        elif not char.isspace():
            comma = None
        out.append(char)
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """Parses JSON with comments. Raises `json.JSONDecodeError` with the line and column, or TooDeep."""
    return json_input.loads(strip(text))
