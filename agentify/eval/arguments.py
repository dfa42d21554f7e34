"""Whether a plan's arguments are among those a public set accepts (BFCL's possible answers).

A set that labels arguments gives, for each argument of the query's one tool, the values it accepts; `""` among
them means the argument may be left out (or set to `""`). As BFCL's own checker does, a plan matches when every
argument it sets is one the tool's answer names, with an accepted value, and every argument that may not be left
out is set. Texts compare without case, spaces, quotes or the punctuation BFCL ignores (`,./-_*^`), lists element
by element, objects as a plan's arguments are. Numbers compare as numbers, a little more loosely than BFCL's
checker, which also checks their types: `3` is `3.0`, and a number given as text is read. A boolean is its own
name (`True` is "true").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_IGNORED = re.compile(r"[\s,./\-_*^'\"]")


def matches(arguments: Mapping[str, Any], accepted: Mapping[str, Sequence[Any]]) -> bool:
    """Whether `arguments` (a plan's) are what `accepted` (each argument's accepted values) allows."""
    for name, value in arguments.items():
        if name not in accepted or not any(_same(value, v) for v in accepted[name] if v != "" or value == ""):
            return False
    return all(name in arguments for name, values in accepted.items() if "" not in values)


def _same(value: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return str(value).strip().lower() == str(expected).strip().lower()
    if isinstance(expected, int | float):
        number = _number(value)
        return number is not None and abs(number - float(expected)) < 1e-9
    if isinstance(expected, str):
        return isinstance(value, str | int | float) and _text(str(value)) == _text(expected)
    if isinstance(expected, list):
        return isinstance(value, list) and len(value) == len(expected) and all(map(_same, value, expected))
    if isinstance(expected, dict):  # BFCL lists a nested argument's accepted values too
        nested = {k: v if isinstance(v, list) else [v] for k, v in expected.items()}
        return isinstance(value, dict) and matches(value, nested)
    return bool(value == expected)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _text(text: str) -> str:
    return _IGNORED.sub("", text).lower()
