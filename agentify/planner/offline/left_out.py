"""What the arguments of a plan leave out of what the task excludes (`negation.exclusions`, set apart in
`Mentions.left_out`): the choices of a list or of a single choice, and the patterns of the one list of patterns to
exclude (`leave_out`); `patterns` reads those an exclusion names. Whether that honours the whole exclusion is
`honour`'s question."""

from __future__ import annotations

import re
from typing import Any

from agentify.planner.catalog import enum_values
from agentify.planner.offline.extract import Exclusion, Mentions
from agentify.planner.offline.roles import named_in, role
from agentify.planner.words import words

EXCLUDING = frozenset(words("exclude ignore"))  # the name of an argument for what to leave out
INSTEAD = re.compile(r"(?:instead|rather)\b", re.IGNORECASE)  # "instead of *.png": a replacement, not a filter
OTHERS = frozenset("all every each everything other others rest".split())
CHOOSING = ("enum", "enum_list")


def leave_out(
    properties: dict[str, dict[str, Any]],
    required: set[str],
    arguments: dict[str, Any],
    mentions: Mentions,
    defaulted: set[str],
) -> tuple[list[Any], list[str]]:
    """The choices the task excludes that the arguments honour: a list of choices without them (when the task
    does not also ask for all the others: "run login and every other scenario except checkout"), all the others
    when the task names none to keep and the list is required ("run every scenario but checkout": also returned,
    by argument name), or a single choice that the task sets to another value ("by size, not by name"); or the
    patterns it excludes ("except", not "instead of"), in the one list of patterns to exclude
    (`excludePatterns`)."""
    excluded = [words(x.text) for x in mentions.left_out]
    others_too = bool(OTHERS.intersection(re.findall(r"[a-z]+", mentions.user_text.lower())))
    left_out: list[Any] = []
    others: list[str] = []
    for name, spec in properties.items() if excluded else ():
        kind = role(name, spec)
        options = enum_values(spec) if kind == "enum" else enum_values(spec.get("items") or {})
        said = list(dict.fromkeys(o for x in excluded for o in named_in(options, x))) if kind in CHOOSING else []
        value = None if name in defaulted else arguments.get(name)  # a default is no other value the task set
        kept = value if isinstance(value, list) else [] if value is None else [value]
        complement = kind == "enum_list" and name not in arguments and name in required
        if said and complement and (rest := [o for o in options if o not in said]):
            arguments[name] = rest
            left_out += said
            others.append(name)
        elif said and kept and not any(v in said for v in kept) and not (kind == "enum_list" and others_too):
            left_out += said
    filters = [x for x in mentions.left_out if not INSTEAD.match(x.text.lstrip(" ,"))]  # "instead of" replaces
    named = [p for x in filters for p in patterns(x)]
    excluding = [n for n, spec in properties.items() if EXCLUDING & set(words(n)) and role(n, spec) == "texts"]
    if named and len(excluding) == 1 and excluding[0] not in arguments:  # "but leave out the *.png files"
        arguments[excluding[0]] = named
        left_out += named
    return left_out, others


def patterns(exclusion: Exclusion) -> list[str]:
    """What an exclusion names that a list of patterns to exclude can hold, as the task writes it: its globs,
    quoted names and relative paths ("excluding 'arbigent-result'", "but not in arbigent"). An absolute path is
    none: the server matches patterns against paths relative to where it searches."""
    written = (m.text.strip() for m in exclusion.values if m.kind in ("glob", "quoted", "path"))
    relative = (t.removeprefix("./") for t in written if t and not t.startswith(("/", "~", "\\")))
    return list(dict.fromkeys(t for t in relative if t and not re.search(r"\s", t)))
