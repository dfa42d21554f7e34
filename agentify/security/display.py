"""Showing text that came from elsewhere (a client, a backend, a model) without letting it change what is
shown around it: control, format, separator and unassigned characters are written as escapes, so a value
can neither start a new line of a prompt or a log nor reorder what follows it (bidi controls)."""

from __future__ import annotations

import unicodedata

_HIDDEN = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"))
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(text: str) -> str:
    """`text` with every control, format, separator and unassigned character written as an escape."""
    return "".join(_NAMED.get(c) or (_escape(c) if unicodedata.category(c) in _HIDDEN else c) for c in text)


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
