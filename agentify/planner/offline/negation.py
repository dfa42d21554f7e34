"""What a task leaves out ("run all the scenarios except checkout") and what it says not to do ("don't run ...").

- `exclusions` finds the parts of a task that leave something out: what follows "except (for)", "excluding",
  "apart from", "aside from", "other than", "save for", "but not", "not including", "instead of", "rather than",
  "skipping", "ignoring", "leave out", a comma and "not" ("by size, not by name"), or "but" after "all"/"every"/
  "each" and at most two words ("every scenario but settings-language"), up to the end of the sentence or a
  "then". A marker inside a value (a quoted text, a path) is none, and a part never ends inside a value.
- `forbids` tells a task that opens by saying what not to do ("don't delete notes.txt", "never run the tests"):
  the offline planner plans what to do, never the opposite of what the words say.

The planner honours an exclusion only by the arguments (`fill.leave_out`): the other scenario ids for a list of
them, another value the task names for a single choice, or the patterns it excludes in a list of patterns to
exclude. Anything else a task excludes is a
refusal, so that no plan ignores it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_MARKER = re.compile(
    r"\b(?:except(?:\s+for)?|excluding|exclude|apart\s+from|aside\s+from|other\s+than|save\s+for|but\s+not"
    r"|not\s+including|instead\s+of|rather\s+than|skipping|ignoring|leav(?:e|ing)\s+out|(?:all|every|each)(?:\s+[a-z-]+){0,2}?\s+(?P<but>but)"
    r"(?!\s+(?:also|then|first|please|only|just)\b))\b|,\s*not\b",
    re.IGNORECASE,
)
_END = re.compile(r"[;!?]|\.(?=\s|$)|\bthen\b", re.IGNORECASE)
_FORBIDS = re.compile(r"^\W*(?:please\s+)?(?:don'?t|do\s+not|never|dont)\b(?!\s+(?:forget|hesitate)\b)", re.I)


def exclusions(query: str, values: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of `query` that leave something out, each from its marker to the end of its part; `values`: the
    spans of the task's values (a marker inside one is none, and a part ends after the value it ends in)."""
    spans: list[tuple[int, int]] = []
    for match in _MARKER.finditer(query):
        if (spans and match.start() < spans[-1][1]) or any(s <= match.start() < e for s, e in values):
            continue
        end = _END.search(query, match.end())
        stop = end.start() if end else len(query)
        while (inside := next((e for s, e in values if s < stop < e), None)) is not None:
            stop = inside
            end = _END.search(query, stop)
            stop = end.start() if end else len(query)
        spans.append((match.start("but") if match.group("but") else match.start(), stop))
    return spans


def forbids(query: str) -> bool:
    """Whether the task opens by saying what not to do."""
    return _FORBIDS.match(query) is not None
