"""What a task leaves out ("run all the scenarios except checkout") and what it says not to do ("don't run ...").

- `exclusions` finds the parts of a task that leave something out. A part starts at one of these markers:
  "except (for)", "excluding", "exclude", "minus", "omit(ting)", "apart from", "aside from", "other than", "save
  for", "but not", "not including", "instead of", "rather than", "skipping", "ignoring", "leave out", "don't"/"do
  not" after "and", "but", a comma or a sentence's end (not "don't worry", "don't mind", "don't know"...), "skip"
  or "ignore" after "and", "but" or a comma, "without" when its part names a choice of the catalog's tools ("run
  all tests without checkout"), a comma and "not" ("by size, not by name"), or "but" after "all"/"every"/"each"/
  "everything" and at most two words ("every scenario but settings-language"). It runs to the end of the sentence
  or a "then", or to a comma followed by more than a short item of a list; a part that opens its sentence
  ("Instead of running everything, run checkout") runs to its first comma. A marker inside a value (a quoted text,
  a path) is none, and a part never ends inside a value.
- `forbids` tells a task that opens by saying what not to do ("don't delete notes.txt", "ok so don't ...",
  "never run the tests", "I don't want you to ...", "no need to ...", "never mind the login tests"; not "don't
  forget to ..." nor "never mind, ..."), says "you must not ...", or takes its request back ("..., or don't",
  "Actually don't."): the offline planner plans what to do, never the opposite of what the words say.

The planner honours an exclusion only by the arguments (`left_out.leave_out`, `honour`): the other scenario ids for a
list of them, another value the task names for a single choice, or the patterns it excludes in a list of patterns
to exclude. Anything else a task excludes is a refusal, so that no plan ignores it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

_APOSTROPHE = "['’]"
_NOT_ASKED = "worry|mind|care|know|have|need|remember|forget|hesitate|think|want|like"  # "don't worry about ..."
_MARKER = re.compile(
    r"\b(?:except(?:\s+for)?|excluding|exclude|minus|omit(?:ting)?|apart\s+from|aside\s+from|other\s+than"
    r"|save\s+for|but\s+not|not\s+including|instead\s+of|rather\s+than|skipping|ignoring|leav(?:e|ing)\s+out"
    rf"|(?:[,.;!?]|\band|\bbut)\s+(?:please\s+)?(?P<dont>don{_APOSTROPHE}?t|do\s+not)(?!\s+(?:{_NOT_ASKED})\b)"
    r"|(?:,|\band|\bbut)\s*(?P<skip>skip|ignore)"
    r"|(?P<without>without)"
    r"|(?:all|every|each|everything)(?:\s+[a-z-]+){0,2}?\s+(?P<but>but)"
    r"(?!\s+(?:also|then|first|please|only|just)\b))\b"
    r"|,\s*not\b",
    re.IGNORECASE,
)
_CHOICE = re.compile(r"[\w-]+")
ITEM_WORDS = 3  # an item of a list of what is left out: "the settings ones", "logout and login"
_END = re.compile(r"[;!?]|\.(?=\s|$)|\bthen\b", re.IGNORECASE)
_FORBIDS = re.compile(
    rf"^\s*(?:(?:please|pls|ok|okay|so|hey|um|well|actually)\W+)*(?:i\s+(?:don{_APOSTROPHE}?t|do\s+not)\s+want"
    rf"|don{_APOSTROPHE}?t|do\s+not|never|avoid|no\s+need\s+to|never\s+mind\s+(?!,))\b"
    r"(?!\s+(?:forget|hesitate|mind)\b)"
    # anywhere: "you must not run ...", "..., or don't", "Actually don't."
    rf"|\byou\s+(?:must|should)(?:\s+not|n{_APOSTROPHE}t)\s+(?!forget)"
    rf"|\b(?:or|actually|no|then)\W+don{_APOSTROPHE}?t\s*(?:[.!,;]|$)",
    re.IGNORECASE,
)


def exclusions(
    query: str, values: Sequence[tuple[int, int]], choices: frozenset[str] = frozenset()
) -> list[tuple[int, int]]:
    """The spans of `query` that leave something out, each from its marker to the end of its part; `values`: the
    spans of the task's values, sorted and not overlapping (a marker inside one is none, and a part ends after the
    value it ends in); `choices`: what the catalog's tools choose among, lowercased, the only things a "without"
    part leaves out ("run all tests without checkout"; "read the file without the header" is a request)."""
    starts = [s for s, _ in values]

    def inside(position: int) -> int | None:
        """The end of the value that `position` is strictly inside, if any."""
        i = bisect.bisect_right(starts, position) - 1
        return values[i][1] if i >= 0 and values[i][0] < position < values[i][1] else None

    ends = [m.start() for m in _END.finditer(query)]
    spans: list[tuple[int, int]] = []
    passed = 0  # the end of the last "without" part that named no choice: those within it name none either
    for match in _MARKER.finditer(query):
        start = next((match.start(g) for g in ("but", "skip", "dont") if match.group(g)), match.start())
        if (spans and start < spans[-1][1]) or inside(start) is not None or (match.group("without") and start < passed):
            continue
        opens = _opens_sentence(query, start)
        stop = _stop(query, match.end(), ends, opens)
        while (end := inside(stop)) is not None:
            stop = _stop(query, end, ends, opens)
        if match.group("without") and not choices.intersection(_CHOICE.findall(query[start:stop].lower())):
            passed = stop
            continue
        spans.append((start, stop))
    return spans


def _opens_sentence(query: str, start: int) -> bool:
    """Whether only a sentence's end (or nothing) and marks precede `start`: a look back over the marks alone."""
    i = start
    while i > 0 and not query[i - 1].isalnum() and query[i - 1] not in ".;!?":
        i -= 1
    return i == 0 or query[i - 1] in ".;!?"


def _stop(query: str, position: int, ends: list[int], opens: bool) -> int:
    """Where the part from `position` ends (`ends`: where the sentences end, and each "then"): the sentence's end;
    the first comma for a part that opens its sentence; else the first comma after which comes more than a short
    item of a list ("except checkout, logout and login" goes on; "but leave out '*.png', the screenshots are just
    noise" does not)."""
    i = bisect.bisect_left(ends, position)
    stop = ends[i] if i < len(ends) else len(query)
    comma = query.find(",", position, stop)
    while comma >= 0 and not opens:
        following = query.find(",", comma + 1, stop)
        if len(query[comma + 1 : following if following >= 0 else stop].split()) > ITEM_WORDS:
            return comma
        comma = following
    return comma if comma >= 0 else stop


def forbids(query: str) -> bool:
    """Whether the task says what not to do: it opens so, or takes its request back ("..., or don't")."""
    return _FORBIDS.search(query) is not None
