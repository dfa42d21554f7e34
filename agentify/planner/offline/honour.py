"""Whether a plan leaves out what its task excludes (`Mentions.left_out`, found by `negation.exclusions`).

A plan honours an exclusion only through the choices of its tool's arguments (`fill.leave_out`): the exclusion
names a choice they leave out, each value said in it is such a choice, and none of them also names another tool of
the backend ("all the tests except login": the `login` scenario, or the tests tagged login?). A list that took
every choice but the excluded ones is right only when the task asks for all of them (`for_all`): "run all the
tests except checkout", not "run the settings tests except settings-language".
"""

from __future__ import annotations

import re

from agentify.planner.catalog import CatalogTool
from agentify.planner.offline.extract import Exclusion, Mentions
from agentify.planner.offline.fill import Filling, says
from agentify.planner.words import SYNONYMS, stem, words

ALL = frozenset({"all"})
ALL_WORDS = frozenset(stem(w) for w in "the a an full whole entire every complete again".split())  # "all" said
EVERY = frozenset(words("each everything"))
SOME = frozenset("some other only any few".split())  # words that ask for part of the choices, not all of them
_WORD = re.compile(r"[a-z0-9]+")


def honours(
    tool: CatalogTool, filling: Filling, exclusion: Exclusion, mentions: Mentions, names: list[frozenset[str]]
) -> bool:
    """Whether `filling` of `tool` leaves out what `exclusion` says; `names`: the words of the names of the other
    tools of its backend."""
    said = words(exclusion.text)
    named = [v for v in filling.left_out if says(said, v)]
    return (
        bool(named)
        and all(any(words(m.text) == words(str(v)) for v in named) for m in exclusion.values)
        and not any(set(words(str(v))) <= name for v in named for name in names)
        and (not filling.others or for_all(tool, filling.others, names, mentions))
    )


def for_all(tool: CatalogTool, arguments: tuple[str, ...], names: list[frozenset[str]], mentions: Mentions) -> bool:
    """Whether the task asks for all of a tool's choices but those it excludes: besides them, it says only words
    for all, the name of the tool or of its backend's tool for all, and the name of the argument ("run all the
    tests except checkout"; not "run the settings tests except settings-language", nor "run some tests but ...")."""
    if SOME.intersection(_WORD.findall(mentions.user_text.lower())):
        return False
    allowed = set(ALL_WORDS | ALL | EVERY) | set(words(f"{tool.backend} {tool.tool.name} {' '.join(arguments)}"))
    allowed |= set().union(*(name for name in names if ALL <= name))
    return all(w in allowed or allowed.intersection(SYNONYMS.get(w, ())) for w in words(mentions.user_text))
