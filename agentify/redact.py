"""Secret redaction shared by every sink the gateway writes to.

A `Redactor` knows the literal secrets of this run (API keys, every value of a
backend's `env`, the console token) and also masks secret-shaped strings it was
never told about: bearer tokens and `sk-`-style keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"
_MIN_SECRET_LEN = 4

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(sk-)[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
    re.compile(r"([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)"),  # the password of scheme://user:pass@host
)


class Redactor:
    """Masks known secrets and secret-shaped substrings. Thread-safe for reads."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Registers more literal secrets; short or empty values are ignored (they would mask everything)."""
        merged = set(self._secrets) | {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted(merged, key=len, reverse=True))

    def text(self, value: str, *, patterns: bool = True) -> str:
        """Masks the known secrets and, unless `patterns` is off, secret-shaped substrings."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        if patterns:
            for pattern in _PATTERNS:
                value = pattern.sub(lambda m: m.group(1) + MASK, value)
        return value

    def data(self, value: Any, *, patterns: bool = True) -> Any:
        """Redacts every string inside JSON-like data, returning a copy."""
        if isinstance(value, str):
            return self.text(value, patterns=patterns)
        if isinstance(value, dict):
            return {k: self.data(v, patterns=patterns) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v, patterns=patterns) for v in value]
        return value
