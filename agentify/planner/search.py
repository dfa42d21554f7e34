"""`search_tools`: the best tools of every backend for a query, by the index's hybrid ranking.

The ranking is `ToolIndex.search` (lexical and semantic, see `retrieval`), the one the planners
use, so what the IDE's model is shown is what a planner would consider first. A query that asks
for several things ("read the config and open the login page") is also split at its
conjunctions, and the best tool of each part follows the whole query's first `KEEP` tools, so
every part's tool is in the answer. (Interleaving each part's whole ranking instead lost recall@5
on every public set: a part such as "I'm a football fan" brings in tools of its own.) Tools that
score nothing are never returned.
"""

from __future__ import annotations

import re

from agentify.planner import TaskInput
from agentify.planner.offline.extract import ASKED, analyse
from agentify.planner.offline.planner import DEPRECATED_FACTOR
from agentify.planner.retrieval import Ranked, ToolIndex
from agentify.planner.words import words

# "and then", "then", "and", "also", ";" and ", and": where one request ends and the next begins. It runs on
# the query with its white space folded to single spaces, so every place it is tried costs a bounded step.
_SPLIT = re.compile(r" ?(?:;|,? (?:and then|then|and also|also|and) ) ?", re.I)
MIN_PART_WORDS = 2  # a part with fewer words is a list's item ("salt and pepper"), not a request
KEEP = 3  # the whole query's first tools, before each part's best one (chosen on the public sets' tuning parts)


def parts(query: str) -> list[str]:
    """The requests of a query that asks for several; [] when it asks for one."""
    folded = " ".join(query.replace("\n", ";").split())
    found = [p for p in _SPLIT.split(folded) if len(words(p)) >= MIN_PART_WORDS]
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
    whole = ranked(index, query, limit)
    best_of_parts = [found[0] for found in (ranked(index, p, 1) for p in parts(query)) if found]
    merged: dict[str, Ranked] = {r.tool.name: r for r in whole[:KEEP]}
    for r in [*best_of_parts, *whole[KEEP:]]:
        merged.setdefault(r.tool.name, r)
    return list(merged.values())[:limit]
