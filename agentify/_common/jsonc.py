"""JSON with comments and trailing commas (JSONC), as VS Code and Cursor write their `mcp.json`: read by
the config loader and by `agentify connect`.

Comments and trailing commas become spaces (newlines stay), so a JSON error still names the line
and column the user sees in the file. One linear pass; a `//` inside a string (a URL) is not a comment.
"""

from __future__ import annotations

from typing import Any

from agentify._common import json_input

_CLOSERS = "}]"


def loads(text: str) -> Any:
    """Parses JSON with comments. Raises `json.JSONDecodeError` with the line and column, or `TooDeep`."""
    return json_input.loads(strip(text))


def strip(text: str) -> str:
    """`text` with its comments and trailing commas blanked out; plain JSON comes back unchanged."""
    out: list[str] = []
    comma = -1  # index in `out` of the last comma not yet followed by a value
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            comma, i = -1, end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end == -1 else end + 2  # unterminated: JSON then reports the end of the text
            out.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
        else:
            if char in _CLOSERS and comma >= 0:
                out[comma] = " "
            if not char.isspace():
                comma = len(out) if char == "," else -1
            out.append(char)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """The index after the string that opens at `start` (or the end of its line, where JSON will complain)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] in '"\n':
            return i + 1 if text[i] == '"' else i
        else:
            i += 1
    return len(text)
