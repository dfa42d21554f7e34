"""Values the words of a task name without quoting them: element refs and key names.

- An element ref is what a browser snapshot labels elements with: `e5`, `f2e13` ("click e5").
  It fills an argument that takes a ref: `ref`, `target`, `startTarget`...
- A key name is a keyboard key right after "press"/"hit"/"tap" or right before "key"
  ("press Enter", "hit the Escape key", "press Control+A"). It fills an argument named `key`.
  "enter the text" is not a key: the word must be where a key is named.
- A boolean argument is true when the task says its name ("double click" -> `doubleClick`,
  "a full page screenshot" -> `fullPage`, "accept the dialog" -> `accept`); never false,
  since a task that does not say it leaves it unset.
- A quoted text no argument is named for goes to the one optional argument with a plain
  text name (`text`, `content`...), never to one of several.
"""

from __future__ import annotations

import re

REF = re.compile(r"(?:f\d+)?e\d+")
REF_NAMES = frozenset({"ref", "target"})
KEY_NAMES = frozenset({"key"})
PLAIN_TEXT_NAMES = frozenset({"text", "content", "message", "value"})
PRESS_WORDS = frozenset({"press", "hit", "tap", "push"})
_KEYS = {
    "enter": "Enter",
    "return": "Enter",
    "escape": "Escape",
    "esc": "Escape",
    "tab": "Tab",
    "backspace": "Backspace",
    "delete": "Delete",
    "del": "Delete",
    "space": "Space",
    "spacebar": "Space",
    "home": "Home",
    "end": "End",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown",
    "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight",
    "insert": "Insert",
}
_MODIFIERS = {"control": "Control", "ctrl": "Control", "shift": "Shift", "alt": "Alt", "meta": "Meta", "cmd": "Meta"}
_FUNCTION_KEY = re.compile(r"f([1-9]|1[0-2])")

# Numbers said in words before what they count ("the last twenty lines", "wait five seconds"): not "one" ("the one
# of them"), nor before other nouns ("two bedrooms" is a room count an API may take as words or leave to the text).
NUMBER_WORDS = {
    w: n
    for n, w in enumerate(
        "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen"
        " eighteen nineteen twenty".split(),
        start=2,
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "hundred": 100}
COUNTED = frozenset(
    "lines seconds secs minutes mins milliseconds ms steps retries tries attempts times pixels px results rows"
    " entries levels".split()
)


def is_ref(token: str) -> bool:
    return REF.fullmatch(token) is not None


def key_name(token: str, before: list[str], after: str) -> str | None:
    """The canonical key `token` names, when it stands where a key is named; else None."""
    pressed = bool(before) and (
        before[-1] in PRESS_WORDS or (before[-1] == "the" and len(before) > 1 and before[-2] in PRESS_WORDS)
    )
    if not (pressed or after == "key"):
        return None
    parts = token.split("+")
    keys = [_single(p) for p in parts]
    if any(k is None for k in keys):
        return None
    if len(keys) > 1 and not all(p.lower() in _MODIFIERS for p in parts[:-1]):
        return None
    return "+".join(k for k in keys if k is not None)


def _single(written: str) -> str | None:
    word = written.lower()
    if word in _KEYS:
        return _KEYS[word]
    if word in _MODIFIERS:
        return _MODIFIERS[word]
    if _FUNCTION_KEY.fullmatch(word):
        return word.upper()
    return written if len(written) == 1 and written.isalnum() else None  # as written: "A" is not "a"
