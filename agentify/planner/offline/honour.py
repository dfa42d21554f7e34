"""Whether a plan leaves out what its task excludes (`Mentions.left_out`, found by `negation.exclusions`).

A plan honours an exclusion only through its arguments (`left_out.leave_out`): the exclusion names the choices or
patterns they leave out and says nothing else but the tool's own words and small ones ("except the checkout
scenario", "but leave out the *.png files"; not "except logout and the settings ones"); no choice it names, nor
any the plan keeps, also names another tool of the backend ("all the tests except login": the `login` scenario, or
the tests tagged login?); and a list that took every choice but the excluded ones is right only when the task asks
for all of them (`for_all`): "run all the tests except checkout", not "run the settings tests except
settings-language". An exclusion that names nothing asks nothing only when it is a replacement or "other than
that" ("Instead of running everything, run checkout"), or an action a read-only tool never takes ("don't run
anything").
"""

from __future__ import annotations

import re

from agentify.planner.catalog import CatalogTool
from agentify.planner.offline.extract import Exclusion, Mentions
from agentify.planner.offline.fill import Filling
from agentify.planner.offline.left_out import patterns
from agentify.planner.offline.roles import named_in, read_only
from agentify.planner.words import SYNONYMS, stem, words

ALL = frozenset({"all"})
ALL_WORDS = frozenset(stem(w) for w in "the a an full whole entire every complete again".split())  # "all" said
EVERY = frozenset(words("each everything"))
SOME = frozenset("some other only any few".split())  # words that ask for part of the choices, not all of them
MARKER_WORDS = frozenset(
    words("except excluding exclude minus omit omitting apart aside other than save but not including instead")
    + words("rather skip skipping ignore ignoring leave leaving out don't dont do all every each everything without")
)
TURNS = frozenset("but other except apart besides only".split())  # a second turn after an exclusion's marker
FILLER = frozenset(words("one ones file files item items thing things stuff noise"))
FILLER |= frozenset(words("folder folders directory directories dir"))
CONTEXT = re.compile(
    r"(?:instead\s+of|rather\s+than|(?:other\s+than|apart\s+from|aside\s+from)\s+(?:that|this)\b)", re.I
)
NEGATIVE = re.compile(  # an action a read-only tool never takes, not a filter ("don't show login-wrong-password")
    r"(?:don['’]?t|do\s+not)\s+(?:run|execute|start|launch|change|modify|edit|write|save|delete|remove|touch)"
    r"\s+(?:anything|any\s+tests?|it|them|the\s+tests?)\s*$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")


def unhonoured(tool: CatalogTool, filling: Filling, mentions: Mentions, names: list[frozenset[str]]) -> tuple[str, ...]:
    """What the task excludes that `filling` of `tool` does not leave out, as the task says it; `names`: the words
    of the names of the other tools of its backend."""
    if not mentions.left_out:
        return ()
    written = {p for x in mentions.left_out for p in patterns(x)}
    left = {str(v) for v in filling.left_out}
    choices = list(dict.fromkeys(v for v in filling.left_out if str(v) not in written))
    own = set(words(f"{tool.backend} {tool.tool.name} {' '.join(tool.input_schema.get('properties') or {})}"))
    # what is kept must be as plain: "run the login tests, not login-wrong-password" keeps the tag's, not `login`
    kept_plain = not any(set(words(str(v))) <= name for v in filling.chosen for name in names)
    everything = kept_plain and (not filling.others or for_all(tool, filling.others, names, mentions))
    return tuple(
        x.text.strip(" ,")
        for x in mentions.left_out
        if not _honours(x, choices, left, own | MARKER_WORDS | FILLER, names, everything, read_only(tool))
    )


def _honours(
    exclusion: Exclusion,
    choices: list[object],
    left: set[str],
    allowed: set[str],
    names: list[frozenset[str]],
    everything: bool,
    reads_only: bool,
) -> bool:
    """Whether the arguments leave out what `exclusion` says: it names what they leave out and nothing else (but
    the tool's own words and small ones), none of it also names another tool of the backend ("all the tests except
    login": the `login` scenario, or the tests tagged login?), and every other choice is taken only when the task
    asks for all of them; and it turns only once (not "skip all but the arbigent folder"). "don't run anything"
    asks nothing of a read-only tool, and a replacement ("instead of
    running everything") or "other than that" nothing of any, when they name no value."""
    said, text = words(exclusion.text), exclusion.text.lstrip(" ,")
    if TURNS.intersection(_WORD.findall(text.lower())[1:]):  # "skip all but the arbigent folder": turned twice
        return False
    named = [str(v) for v in named_in(choices, said)] + [p for p in patterns(exclusion) if p in left]
    if not named:  # nothing to leave out by: only a replacement or "other than that" asks nothing of the plan
        return not exclusion.values and (bool(CONTEXT.match(text)) or reads_only and bool(NEGATIVE.match(text)))
    spoken = {w for v in named for w in words(v)}
    return (
        all(m.text in left or any(words(m.text) == words(v) for v in named) for m in exclusion.values)
        and set(said) <= spoken | allowed
        and not any(set(words(v)) <= name for v in named for name in names)
        and everything
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
