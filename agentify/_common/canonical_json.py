"""RFC 8785 (JCS) canonical JSON: one byte string per JSON value, whoever wrote it and however.

What makes it canonical: no whitespace; object members sorted by their names' UTF-16 code units
(not by code points: a name with a character beyond U+FFFF sorts by its surrogates); strings
escaped only where JSON must (`"`, `\\` and the control characters, with the two-character forms
`\\b \\t \\n \\f \\r` and otherwise lower-case `\\u00xx`), everything else as UTF-8; numbers as
ECMAScript's `Number.prototype.toString` writes an IEEE 754 double (`1e+30`, `4.5`, `0.002`,
`-0` as `0`). An integer beyond 2**53 is written as the double it parses to, as in every JSON
reader that follows I-JSON.

Raises `ValueError` for what JSON cannot hold (NaN, infinities, a non-string key, another type).
"""

from __future__ import annotations

import math
from typing import Any

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES |= {chr(c): f"\\u{c:04x}" for c in range(0x20) if chr(c) not in _ESCAPES}
_SAFE_INTEGER = 2**53


def canonical(value: Any) -> bytes:
    """`value` (what `json.loads` returns: dict, list, str, int, float, bool, None) as RFC 8785 bytes."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts).encode("utf-8", "surrogatepass")


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(value) if -_SAFE_INTEGER <= value <= _SAFE_INTEGER else _number(float(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise ValueError("a JSON object's member names are strings")
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise ValueError(f"{type(value).__name__} is not a JSON value")


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'


def _number(value: float) -> str:
    """ECMAScript's Number::toString: the shortest digits that read back as `value` (Python's repr finds
    the same ones), placed as that algorithm says."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value} is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction.rstrip("0")).lstrip("0") or "0"
    # The decimal point sits `point` digits into `digits` (n in the ECMAScript algorithm).
    point = len(whole.lstrip("0")) if whole.strip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    point += int(exponent or 0)
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        shown = digits[0] + (f".{digits[1:]}" if k > 1 else "")
        text = f"{shown}e{'+' if point - 1 >= 0 else '-'}{abs(point - 1)}"
    return sign + text
