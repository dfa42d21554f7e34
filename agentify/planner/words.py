"""The words a query and a tool are matched by: lower-cased, split identifiers, a small stemmer, stop words
dropped, a few synonyms; and a task's sentences, each of which is also compared on its own."""

from __future__ import annotations

import re
from collections import defaultdict

SYNONYM_WEIGHT = 0.5

STOP_WORDS = frozenset(
    """a an the of in on at to for from by with and or but as is are am was were be been being has have had
    it its this that these those them they
    me my i you your we our us please can could would will should do does did what whats which who whom whose
    how when where why
    there their then than so if into onto via about up out some any just also only other such each
    tell give want need let lets now inside within over both sure still really pls plz u thx thanks""".split()
)
# Words people use for what tools call otherwise; each also counts (at half weight) as its synonyms.
_SYNONYMS = {
    "folder": "directory",
    "dir": "directory",
    "open": "navigate read",
    "go": "navigate",
    "visit": "navigate",
    "browse": "navigate",
    "load": "navigate read",
    "website": "page browser",
    "webpage": "page browser",
    "site": "page browser",
    "make": "create",
    "mkdir": "create directory",
    "new": "create",
    "find": "search",
    "locate": "search",
    "save": "write",
    "store": "write",
    "rename": "move",
    "ls": "list directory",
    "view": "read",
    "show": "read",
    "display": "read",
    "print": "read",
    "cat": "read",
    "dump": "read",
    "say": "read",  # "what does notes.txt say?"
    "summarize": "read",  # a file is read to be summarized
    "containing": "content",
    "picture": "screenshot",
    "capture": "screenshot",
    "rerun": "run",
    "kick": "run",  # "kick off the smoke tests"
    "suite": "test",
    "e2e": "test",
    "check": "test",
    "verify": "test",
    "ensure": "test",
    "works": "test",
    "working": "test",
    "passing": "test",
    "hit": "press",
    "tap": "press",
    "pause": "wait",
    "hang": "wait",  # "hang on 5 seconds"
    "permitted": "allowed",
    "pick": "select",
    "choose": "select",
    "shut": "close",
    "quit": "close",
    "field": "element",  # "the search field"
    "popup": "dialog",
    "alert": "dialog",
    "structure": "tree",
    "hierarchy": "tree",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z][a-z0-9]*|[0-9]+")


def stem(word: str) -> str:
    """A deliberately small stemmer: the same rules on both sides are what matter."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith(("ches", "shes", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Stemmed, lower-cased words of `text` without stop words; identifiers are split into words."""
    return [stemmed for _, stemmed in word_pairs(text)]


def word_pairs(text: str) -> list[tuple[str, str]]:
    split = _CAMEL.sub(" ", text).lower()
    return [(w, stem(w)) for w in _WORD.findall(split) if w not in STOP_WORDS and len(w) > 1]


SYNONYMS: dict[str, tuple[str, ...]] = {stem(k): tuple(words(v)) for k, v in _SYNONYMS.items()}


def query_terms(query: str) -> dict[str, float]:
    """The weighted terms a query is ranked by: its words, and their synonyms at half weight."""
    terms: defaultdict[str, float] = defaultdict(float)
    for word in words(query):
        terms[word] += 1.0
    for word in list(terms):
        for synonym in SYNONYMS.get(word, ()):
            terms[synonym] = max(terms[synonym], SYNONYM_WEIGHT)
    return dict(terms)


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=\S)")
MAX_SENTENCES = 8


def sentences(text: str) -> list[str]:
    """The sentences of `text` (at most `MAX_SENTENCES`, the rest kept with the last): a long task's vector is the
    mean of all its words, so each request in it is also compared on its own."""
    found = [s for s in _SENTENCE_END.split(text.strip()) if s]
    return found[: MAX_SENTENCES - 1] + [" ".join(found[MAX_SENTENCES - 1 :])] if len(found) > MAX_SENTENCES else found
