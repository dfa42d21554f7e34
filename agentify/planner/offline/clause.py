"""The part of a task that holds its request, when the rest is only context ("before the next run overwrites it,
move report.html to report-previous.html"; "what model does it use? read arbigent/arbigent-config.yaml").

A task splits into parts at a sentence's end, a question or exclamation mark, a semicolon, a comma or a dash (never
inside a value). The request is the one part that holds every value of the task (a path, a URL, a pattern, a quoted
text...: at least one that is not a number), when there are several parts and the others are only context: none
of them makes the request conditional or a sequence, or negates anything ("if", "when", "then", "also", "not",
"don't"...: "if the tests failed, move report.html to failed/" is no plain move). The offline planner plans that
part by its rules alone when the whole task is refused, so that words of context ("the whole thing is too long")
neither outvote the tool nor tie it with another; it also checks that the rest is no request of its own. A part
that speaks of the user ("my user ID is '42'") is a statement, not the request.
"""

from __future__ import annotations

import re

from agentify.planner.offline.extract import Mentions

_BREAK = re.compile(r"[;?!]+\s*|\.\s+|,\s+|\s+[—–-]+\s+")
_STATEMENT = re.compile(r"^\W*(?:i|i'm|im|i've|my|we|we're|our|me)\b", re.IGNORECASE)  # "my user ID is ...": no request
_NOT_CONTEXT = re.compile(
    r"\b(?:if|unless|when|whenever|once|in\s+case|then|after|afterwards|also|otherwise|else|not|never|no|without"
    r"|instead|except|but)\b|n't\b",
    re.IGNORECASE,
)
STRONG = frozenset({"url", "path", "glob", "quoted", "email", "ref", "key"})


def request_part(mentions: Mentions) -> tuple[str, str] | None:
    """The part of the task that holds all its values, and the rest, when the rest is only context (see the module
    docstring)."""
    if not any(m.kind in STRONG for m in mentions.items) or mentions.left_out:
        return None
    cuts, start = [], 0
    for match in _BREAK.finditer(mentions.query):
        if not any(m.start < match.end() and match.start() < m.end for m in mentions.items):
            cuts.append((start, match.start()))
            start = match.end()
    cuts.append((start, len(mentions.query)))
    parts = [(s, e) for s, e in cuts if mentions.query[s:e].strip()]
    holding = [(s, e) for s, e in parts if all(s <= m.start and m.end <= e for m in mentions.items)]
    if len(parts) < 2 or len(holding) != 1:
        return None
    rest = ". ".join(mentions.query[s:e].strip() for s, e in parts if (s, e) != holding[0])
    part = mentions.query[holding[0][0] : holding[0][1]]
    return None if _NOT_CONTEXT.search(rest) or _STATEMENT.match(part) else (part, rest)
