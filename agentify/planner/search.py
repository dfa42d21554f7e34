"""`search_tools`: the best tools of every backend for a query, by the index's hybrid ranking.

The ranking is `ToolIndex.search` (lexical and semantic, see `retrieval`), the one the planners
use, so what the IDE's model is shown is what a planner would consider first. A query that makes
several requests ("read the config and open the login page"; "Can you give me X? Also, provide
Y.") is split into them (`requests`: its sentences, each split at its conjunctions), and after the
whole query's best tool, each next place goes to the tool that scores best on the whole query plus
`OPEN_REQUESTS` times its scores on the requests that the tools already placed do not answer yet: a
request answered by one tool (scoring its best there) no longer pulls, so the next places go to
the requests still open, and a chatty part ("I'm a football fan") that every tool answers alike
pulls none in particular. Tools that score nothing are never returned.
"""

from __future__ import annotations

import re

from agentify.planner import TaskInput
from agentify.planner.offline.extract import ASKED, analyse
from agentify.planner.offline.planner import DEPRECATED_FACTOR
from agentify.planner.retrieval import Ranked, ToolIndex
from agentify.planner.words import sentences, words

# "and then", "then", "and", "also", ";" and ", and": where one request ends and the next begins. It runs on
# the query with its white space folded to single spaces, so every place it is tried costs a bounded step.
_SPLIT = re.compile(r" ?(?:;|,? (?:and then|then|and also|also|and) ) ?", re.I)
MIN_PART_WORDS = 2  # a part with fewer words is a list's item ("salt and pepper"), not a request
OPEN_REQUESTS = 0.05
"""Weight of a tool's scores on the requests still open (each divided by that request's best score), against its
score on the whole query divided by the best one's. Fitted on the public sets' tuning parts (scripts/fit_retrieval.py
--requests)."""
DEPTH = 30
"""The whole query's and each request's best tools that may be placed."""
MAX_REQUESTS = 8
"""A query's requests that are ranked each on their own (a 2,000-character list of "and"s makes over a hundred)."""


def parts(query: str) -> list[str]:
    """The requests of one sentence, split at its conjunctions; [] when it makes one."""
    folded = " ".join(query.replace("\n", ";").split())
    found = [p for p in _SPLIT.split(folded) if len(words(p)) >= MIN_PART_WORDS]
    return found if len(found) > 1 else []


def requests(query: str) -> list[str]:
    """The requests of a query: its sentences, each split at its conjunctions; [] when it makes one. At most
    `MAX_REQUESTS`, the rest kept with the last: each is ranked on its own."""
    found = [p for s in sentences(query) for p in (parts(s) or [s]) if len(words(p)) >= MIN_PART_WORDS]
    if len(found) > MAX_REQUESTS:
        found = [*found[: MAX_REQUESTS - 1], " ".join(found[MAX_REQUESTS - 1 :])]
    return found if len(found) > 1 else []


def ranked(index: ToolIndex, query: str, limit: int) -> list[Ranked]:
    """The query's best `limit` tools. As for the offline planner, a tool that says it is deprecated counts
    half, and a question says "list" and "read", and is answered by a tool that declares itself destructive
    only after every other."""
    mentions = analyse(TaskInput(query=query))
    said = frozenset(ASKED) if mentions.asks else frozenset()
    found = [
        Ranked(r.tool, r.score * DEPRECATED_FACTOR) if r.tool.name in index.deprecated else r
        for r in index.search(mentions.query, mentions.terms(), limit + len(index.deprecated), said)
        if r.score > 0
    ]
    found.sort(key=lambda r: (mentions.asks and r.tool.name in index.destructive, -r.score))
    return found[:limit]


def search_tools(index: ToolIndex, query: str, limit: int) -> list[Ranked]:
    """The query's best `limit` tools; for a query of several requests, chosen in turn as the module says."""
    asked = requests(query)
    whole = ranked(index, query, max(limit, DEPTH) if asked else limit)
    if not asked or not whole:
        return whole[:limit]
    import numpy as np

    found = {r.tool.name: r for r in whole}
    each = []
    for request in asked:
        best = ranked(index, request, DEPTH)
        top = max((r.score for r in best), default=1.0)  # a question puts destructive tools last, whatever they score
        each.append({r.tool.name: r.score / top for r in best})
        for r in best:
            found.setdefault(r.tool.name, r)
    names = list(found)
    on_whole = {r.tool.name: r.score / whole[0].score for r in whole}
    alone = np.array([on_whole.get(name, 0.0) for name in names])
    on_each = np.array([[scores.get(name, 0.0) for name in names] for scores in each])
    open_ = np.ones(len(asked))
    placed: list[Ranked] = []
    free = np.ones(len(names), dtype=bool)
    while len(placed) < min(limit, len(names)):
        # einsum, not `@`: as in `ToolIndex.similarity`, BLAS would spread this small product over threads
        gain = np.where(free, alone + OPEN_REQUESTS * np.einsum("i,ij->j", open_, on_each), -np.inf)
        i = 0 if not placed else int(np.argmax(gain))  # the whole query's best comes first
        placed.append(found[names[i]])
        free[i] = False
        open_ *= 1 - on_each[:, i]
    return placed
