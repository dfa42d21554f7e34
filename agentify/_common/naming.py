"""Tool names every MCP client accepts: `^[a-zA-Z0-9_-]{1,64}$`.

The gateway names backend tools `<backend>__<tool>` and the arbigent runner names a tool per tag;
both replace what falls outside the safe set, and both tell apart names that this made equal, or
that were too long, by a digest of the original.
"""

from __future__ import annotations

import hashlib
import re

MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def safe_name(text: str) -> str:
    """`text` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (the length is kept)."""
    return _UNSAFE.sub("_", text)


def digest_name(base: str, original: str, *, length: int = 8, sep: str = "_", algorithm: str = "sha256") -> str:
    """`base` cut so that `<base><sep><digest of original>` fits in `MAX_TOOL_NAME` characters."""
    digest = hashlib.new(algorithm, original.encode("utf-8")).hexdigest()[:length]
    return f"{base[: MAX_TOOL_NAME - length - len(sep)]}{sep}{digest}"
