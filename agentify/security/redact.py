"""Secret redaction, applied once at each sink (stderr, the console, traces, results).

A `Redactor` knows the literal secrets of this run (API keys, header and auth values, values that
came from `${VAR}`, credential-looking env values, the console token), each also in the forms it
takes inside JSON, a Python repr and a URL (a secret holding `"` or `\\` is spelled differently
there: an error body that quotes it back is still masked), and also masks
secret-shaped strings it was never told about: bearer tokens, `sk-`-style keys, agentify's `agt_`
tokens, JWTs, `token=...`
assignments and the password of `scheme://user:pass@host`.

Every pattern runs in linear time: each repetition that could meet the next one is bounded, and
the URL pattern may only start where a scheme can start, so no input makes the engine backtrack
over what it has already read (tests/unit/test_redact.py feeds each one 1 MB of its worst case).

`bounded` cuts after redacting, never before, so a secret that straddles the cut cannot leak its
first half.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "[REDACTED]"
_MIN_SECRET_LEN = 4
_PRECUT_MARGIN = 64 * 1024
"""`bounded` first drops what lies this far past the limit, then, after masking, as much as a secret
or a secret-shaped match can span, so a secret cut there is never shown in part."""
_PATTERN_REACH = 1100  # the longest text one pattern can need to recognise its match (the URL one)

_PATTERNS = (
    re.compile(r"(?i)\b(bearer[ \t]{1,16})[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(sk-)[A-Za-z0-9_-]{8,}"),
    re.compile(r"\b(agt_)[A-Za-z0-9_-]{16,}"),  # agentify's own per-person tokens (team/tokens_file.py)
    re.compile(r"\b(eyJ)[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),  # a JWT: header.claims.signature
    re.compile(r"(?i)\b((?:api[_-]?key|token|secret|password)[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?)[^\s\"',}]{4,}"),
    # scheme://user:PASSWORD@host. The look-behind lets a scheme start only at the start of a word,
    # and every part is bounded, so a long run of letters costs one pass, not one pass per letter.
    re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/@]{1,256}:)[^\s@/]{1,1024}(?=@)"),
)


class Redactor:
    """Masks known secrets and secret-shaped substrings. Thread-safe for reads."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Registers more literal secrets; short or empty values are ignored (they would mask everything)."""
        forms = {form for secret in secrets if secret for form in _forms(secret)}
        merged = set(self._secrets) | {s for s in forms if len(s) >= _MIN_SECRET_LEN}
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted(merged, key=len, reverse=True))
        self._longest = len(self._secrets[0]) if self._secrets else 0

    def text(self, value: str, *, patterns: bool = True) -> str:
        """Masks the known secrets and, unless `patterns` is off, secret-shaped substrings."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        if patterns and _may_hold_a_shape(value):
            for pattern in _PATTERNS:
                value = pattern.sub(_keep_prefix, value)
        return value

    def data(self, value: Any, *, patterns: bool = True, limit: int | None = None) -> Any:
        """Redacts every string inside JSON-like data, returning a copy; with `limit`, strings are `bounded`."""
        if isinstance(value, str):
            return self.text(value, patterns=patterns) if limit is None else self.bounded(value, limit)
        if isinstance(value, dict):  # keys too: a backend may key its data by session tokens
            return {
                self.data(k, patterns=patterns, limit=limit): self.data(v, patterns=patterns, limit=limit)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v, patterns=patterns, limit=limit) for v in value]
        return value

    def bounded(self, value: str, limit: int) -> str:
        """Redacted, then cut to `limit` characters with a note saying how long it was."""
        original = len(value)
        precut = original > limit + _PRECUT_MARGIN
        if precut:
            value = value[: limit + _PRECUT_MARGIN]
        value = self.text(value)
        if precut:
            # A secret straddling the pre-cut is no longer recognised, and masking what comes before it
            # may pull its first part under `limit`: drop what could be such a part.
            value = value[: max(0, len(value) - self._longest - _PATTERN_REACH)]
        if len(value) <= limit and not precut:
            return value
        return value[:limit] + f" [... cut: {original} characters in all]"


def _forms(secret: str) -> set[str]:
    """The secret as written inside a JSON string, a Python repr, a URL path and a form body."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
    }


def _may_hold_a_shape(value: str) -> bool:
    """False only where no pattern can match: each needs one of these words (in any case), which is cheaper
    to rule out than six regex passes, and most strings a trace records hold none. Case-insensitive
    patterns also match non-ASCII letters (the long s matches s), so a non-ASCII text always gets them."""
    if not value.isascii():
        return True
    v = value.lower()
    return (
        "bearer" in v
        or "sk-" in v
        or "agt_" in v
        or "eyj" in v
        or "api" in v
        or "token" in v
        or "secret" in v
        or "password" in v
        or "://" in v
    )


def _keep_prefix(match: re.Match[str]) -> str:
    return match.group(1) + MASK
