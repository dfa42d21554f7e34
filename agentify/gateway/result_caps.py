"""Size limits on what a backend returns, so one huge result cannot swamp the IDE or the model."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types as types


def cap_result(result: types.CallToolResult, max_chars: int, mask: Callable[[str], str] = str) -> types.CallToolResult:
    """Cuts text beyond `max_chars` in total and drops binary blocks past it, saying so in the result.

    The block that is cut is passed through `mask` first, so a secret straddling the cut is masked
    whole rather than shown in part (results are masked again at their sink)."""
    remaining = max_chars
    content: list[types.ContentBlock] = []
    cut_chars = dropped = 0
    for block in result.content:
        size = block_size(block)
        if size <= remaining:
            content.append(block)
            remaining -= size
        elif isinstance(block, types.TextContent):
            content.append(block.model_copy(update={"text": mask(block.text)[:remaining]}))
            cut_chars += size - remaining
            remaining = 0
        else:
            dropped += 1
    if not cut_chars and not dropped:
        return result
    parts = []
    if cut_chars:
        parts.append(f"{cut_chars} characters of text were cut")
    if dropped:
        parts.append(f"{dropped} binary block(s) were left out")
    note = (
        f"[agentify: the result was larger than maxResultChars ({max_chars}): {' and '.join(parts)}. "
        "Ask for a smaller part (for example the head or tail of a file), or raise maxResultChars in the config.]"
    )
    content.append(types.TextContent(type="text", text=note))
    # Structured content usually repeats what was cut (the filesystem server sends the whole text
    # again): keep it only when nothing was left out.
    return result.model_copy(update={"content": content, "structured_content": None})


def block_size(block: types.ContentBlock) -> int:
    """Characters of text, or of base64 data, a content block carries."""
    if isinstance(block, types.TextContent):
        return len(block.text)
    data = getattr(block, "data", None)
    if isinstance(data, str):
        return len(data)
    resource = getattr(block, "resource", None)
    if resource is not None:
        return len(getattr(resource, "text", None) or getattr(resource, "blob", None) or "")
    return 0
