"""What makes a tool description suspect at any time, even at first sight: it speaks to the model as an
instruction, or it names a tool of another backend (shadowing: "when this tool is available, the
send_email tool must ...").

Every pattern is bounded (no nested repetition, gaps of at most 40 characters), and only the first
`MAX_SCANNED` characters of a description are read, so a hostile description cannot make the check
slow. The list is short on purpose: each entry is a phrasing seen in published tool-poisoning
attacks, and a false alarm costs one `agentify pins approve`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MAX_SCANNED = 20_000

INSTRUCTIONS: dict[str, re.Pattern[str]] = {
    label: re.compile(pattern, re.IGNORECASE)
    for label, pattern in (
        (
            "ignore previous instructions",
            r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?"
            r"(?:previous|prior|above|earlier|other|system)\s+(?:instructions?|messages?|rules|prompts?|guidelines)",
        ),
        ("a tag that shouts (<IMPORTANT>)", r"<\s*/?\s*(?:important|system|instructions?|secret|hidden)\s*>"),
        (
            "before using any other tool",
            r"\bbefore\s+(?:using|calling|running|invoking)\s+(?:any|every|all|each)\s+(?:other\s+)?tools?\b",
        ),
        (
            "keep it from the user",
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|reveal|show|notify)\b.{0,40}\buser\b",
        ),
        ("when this tool is available", r"\bwhen\s+this\s+tool\s+is\s+(?:available|present|loaded|installed)\b"),
        (
            "reads secrets (~/.ssh, id_rsa, mcp.json)",
            r"(?:~/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa)\b|\bmcp\.json\b|~/\.aws/credentials|\.cursor/)",
        ),
        ("you are now", r"\byou\s+are\s+now\s+(?:a|an|in|the)\b"),
        ("system prompt", r"\b(?:reveal|print|show|repeat|output)\s+(?:the\s+|your\s+)?system\s+prompt\b"),
    )
}
"""What a finding is called, and its pattern: phrasings that speak to the model, not about the tool."""

_IDENTIFIER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?")


def instruction_like(text: str | None) -> str | None:
    """The name of the first instruction pattern `text` matches, or None."""
    if not text:
        return None
    scanned = text[:MAX_SCANNED]
    return next((label for label, pattern in INSTRUCTIONS.items() if pattern.search(scanned)), None)


def distinctive(name: str) -> bool:
    """Whether a tool name is unlikely to be a plain word in a description: it has `_`, `-` or `.`, a
    capital inside (`sendEmail`) or a digit. `read` or `search` alone would match ordinary prose."""
    return any(c in name for c in "_-.") or any(c.isupper() for c in name[1:]) or any(c.isdigit() for c in name)


def named_tools(text: str | None, names: Iterable[str]) -> list[str]:
    """The names of `names` that `text` mentions as a whole word (not as part of a longer name)."""
    if not text:
        return []
    found = _IDENTIFIER.findall(text[:MAX_SCANNED])
    words = set(found) | {part for word in found if "." in word for part in word.split(".")}
    return sorted(name for name in names if name in words)


def suspect(defined: Mapping[str, Any], others: Mapping[str, str]) -> str:
    """Why a tool's definition (its description, schemas and annotations) is suspect, or "": it speaks to the
    model as an instruction, or names another backend's tool (`others`: name to `backend__tool`)."""
    text = "\n".join(_texts({k: v for k, v in defined.items() if k != "name"}))[:MAX_SCANNED]
    found = []
    if (label := instruction_like(text)) is not None:
        found.append(f"its description speaks to the model as an instruction ({label})")
    if named := named_tools(text, others):
        found.append("its description names another backend's tool (" + ", ".join(others[n] for n in named) + ")")
    return "; ".join(found)


def _texts(value: Any) -> Iterator[str]:
    """Every string of a definition: the description, and those inside its schemas and annotations."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
