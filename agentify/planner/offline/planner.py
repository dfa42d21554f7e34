"""The offline planner: no model, so it decides only what the query makes plain.

1. Rank every tool with the retrieval index against the query's words (mentions such as a
   path or a URL count as the kind of argument they fill: "path", "url"). The score is then
   weighted by how much of the tool's name the user said (`run-arbigent-test-login` for "run
   the login tests": run, test, login, all of it; `run-arbigent-test-all`: two words of three),
   from `NAME_FLOOR` (none of it) to 1 (all of it); a deprecated tool counts half. A question
   ("what files are in docs?") counts as saying "list" and "read", and is never answered by a
   tool that declares itself destructive.
2. The margin rule: the best tool is taken when its score is at least `MARGIN` times the
   runner-up's, unless it can neither be called nor take the path or URL the task gives; then the
   best tool within `WIDE` that can take every value is ("open notes.txt": the read tool, not the
   one for URLs). Otherwise the tools within that margin are contenders, and the decision is left
   to the arguments: the best tool is taken when it is the only contender that can be called
   with what the task says, and another contender only when it is the only one that takes
   every value the task mentions (two paths: the one read tool that accepts several), or the
   only one that takes them as they are (one path: not the tool for several paths), or, in a check
   with no value, the only one that takes a choice the task names; a task naming a family and none of its
   members goes to the one named for all ("run the tests"). A tool never wins a tie merely because
   it needs no arguments; anything else is a refusal. So is a plan whose tool has no argument for an id
   the task writes that another tool chooses among ("run the settings tests except settings-language"), and a
   plan that does not leave out what the task excludes (`honour`): "run all the tests except checkout" is the
   scenario runner with every other id, since the tool for all cannot leave one out. A task that opens by saying
   what not to do ("don't delete notes.txt") is never planned, nor a plan that would do the opposite of the task
   (`contrary`: a check with a tool that changes things, a stop with a tool that starts).
3. Required arguments are filled from the query and the context (see `extract`), never
   guessed: an argument it cannot fill, or a mentioned value it cannot place, is a refusal. The
   one value taken from the context alone is the working directory, as the path of a read-only
   tool named for folders when the task names no path ("list the files", "print the directory
   tree"). The arguments are validated against the tool's schema like any model's.
4. "check that X (still) works" runs what the test runner (the backend of a tool that takes a
   plain-words `goal`) already has for X: a tool whose name X is ("the login tests"), or a value
   that one of its tools chooses among (the `checkout` scenario); anything else becomes that goal.

A refusal is `PlannerUnavailable`, saying what was understood (the best candidates, the
argument it could not fill) and how to configure a model planner. When it is sure of the tool (by the rules
above, or by the hybrid ranking's confidence) and only required arguments that the task does not say are
lacking, each one a person can give in a form (`form.py`: no credential, no object; no element ref of a page
snapshot, which only a model that read the page knows), the refusal is `NeedsArguments`: the plan with what it
filled, which `orchestrate_task` completes by asking the user. When the task is clearly for a
configured backend that is unavailable (more than half of its words name that backend, more than
the best offered tool matches: "run the login tests" while the arbigent backend failed), the
answer is `BackendUnavailable` naming it, rather than a tool that happens to match a word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentify.errors import BackendUnavailable, NoPlan, PlannerUnavailable
from agentify.planner import NeedsArguments, Plan, PlanUsage, TaskInput
from agentify.planner.catalog import Catalog, CatalogTool, MissingBackend
from agentify.planner.indexes import IndexCache
from agentify.planner.offline import confidence
from agentify.planner.offline.asking import Ask, Unfilled, asking, needs
from agentify.planner.offline.contrary import contrary
from agentify.planner.offline.extract import ASKED, Mention, Mentions, analyse, goal_request
from agentify.planner.offline.fill import Filling, fill
from agentify.planner.offline.honour import ALL, ALL_WORDS, SOME, unhonoured
from agentify.planner.offline.negation import forbids
from agentify.planner.offline.offered import IDENTIFIER, Offered, without_filler
from agentify.planner.offline.roles import takes_role, takes_value
from agentify.planner.retrieval import Ranked, ToolIndex
from agentify.planner.words import STOP_WORDS, SYNONYMS, query_terms, stem, words

MARGIN = 1.25
PLACES = ("path", "url")
_WORD = re.compile(r"[a-z0-9]+")
WIDE = 3.0  # how far below the best a tool may rank and still be taken when only it can take the task's values
CANDIDATES = 3
SHORT = 160
NAME_FLOOR = 0.25
DEPRECATED_FACTOR = 0.5
CONFIGURE = (
    "To plan tasks like this, configure a model: set OPENAI_API_KEY (or planner.apiKey), and OPENAI_BASE_URL for "
    "a local OpenAI-compatible server such as Ollama; planner.provider (or AGENTIFY_PLANNER) selects the planner. "
    "Or rephrase the task with the exact values in quotes."
)


class OfflinePlanner:
    name = "offline"

    def __init__(self, indexes: IndexCache | None = None) -> None:
        self._indexes = indexes or IndexCache()
        self._offered: Offered | None = None

    async def plan(self, task: TaskInput, catalog: Catalog) -> Plan:
        if not catalog.tools:
            raise NoPlan("no backend tools are available to plan with: check `list_backends` for failed backends")
        if forbids(task.query):
            raise NoPlan(
                "the task says what not to do, and the offline planner plans only what to do: say what to run "
                "instead (or nothing needs to be done)."
            )
        index = self._indexes.get(catalog)
        if self._offered is None or self._offered.index is not index:
            self._offered = Offered.of(index)
        mentions = analyse(task, exclusions_apart=True, choices=self._offered.choices)
        if self._offered.taken and (goal := goal_request(mentions)) is not None:
            # What the runner has for X is found by X alone: "check" and "works" would rank every test alike.
            # An ad-hoc goal is found by its kind alone: "check that the page loads" is not a tool named "check".
            named = self._offered.named(goal)
            mentions = replace(
                mentions if named else goal, user_text=without_filler((mentions if named else goal).user_text)
            )
        try:
            planned = self._by_rules(index, catalog, mentions)
        except PlannerUnavailable as refusal:
            planned = self._when_confident(index, catalog, mentions, refusal)
        tool = catalog.get(f"{planned.backend}__{planned.tool}")
        if tool is not None and (why := contrary(tool, task.query, self._offered.runners)) is not None:
            raise NoPlan(
                f"{why}: the offline planner (no model is configured) plans only what the words ask. {CONFIGURE}"
            )
        return planned

    def _when_confident(
        self, index: ToolIndex, catalog: Catalog, mentions: Mentions, refusal: PlannerUnavailable
    ) -> Plan:
        """The hybrid ranking's best tool when it is likely enough to be right (`confidence`), and any
        arguments it needs can be filled; else `no_plan` with the best
        three as candidates."""
        ranked = hybrid(index, mentions)
        message = refusal.message
        alone = hybrid(index, mentions, related=False)
        ask = refusal.ask if isinstance(refusal, Unfilled) else None
        why = _sure(index, mentions, alone)
        if ranked and why and alone[0].tool == ranked[0].tool:
            chosen = ranked[0].tool
            filling = self._fill(chosen, mentions)
            problem = _problem(filling) or chosen.validation_error(filling.arguments)
            if problem is None:
                return _plan(chosen, filling.arguments, why, catalog)
            asked = asking(chosen, filling, why, problem, mentions.base)
            if ask is None and isinstance(asked, Ask):
                ask = asked
            message = (
                f"the offline planner (no model is configured) understood {_label(chosen)}, but "
                f"{asked if isinstance(asked, str) else problem}. {CONFIGURE}"
            )
        candidates = [
            {"name": r.tool.name, "backend": r.tool.backend, "tool": r.tool.tool.name, "description": _short(r.tool)}
            for r in ranked[:CANDIDATES]
        ]
        closest = " Closest tools: " + ", ".join(_label(r.tool) for r in ranked[:CANDIDATES]) + "." if ranked else ""
        if ask is not None:
            raise _needs(ask, candidates, catalog, closest, mentions) from None
        raise NoPlan(message + closest, candidates) from None

    def _fill(self, tool: CatalogTool, mentions: Mentions) -> Filling:
        """`fill`, where an id the task writes that some tool of the catalog chooses among, and that `tool` has no
        argument for, is a value the plan would ignore ("run the settings tests except settings-language"), and so
        is what the task excludes that the arguments do not leave out (`honour`)."""
        filling = fill(tool, mentions)
        ids = self._offered.ids if self._offered else frozenset()
        written = [m for m in IDENTIFIER.finditer(mentions.user_text) if m.group(0).lower() in ids]
        ignored = tuple(
            Mention("quoted", m.group(0), m.group(0), m.start(), m.end())
            for m in written
            if not takes_value(tool, m.group(0))
        )
        names = self._offered.names_of(tool) if self._offered and mentions.left_out else []  # only exclusions need them
        excluded = unhonoured(tool, filling, mentions, names)
        stray = tuple(m.text for m in ignored)
        return replace(filling, unplaced=filling.unplaced + ignored, ignored=excluded, stray_ids=stray)

    def _by_rules(self, index: ToolIndex, catalog: Catalog, mentions: Mentions) -> Plan:
        missing = _missing_fit(catalog.missing, mentions.user_text)
        ranked = rank(index, mentions)
        if not ranked or ranked[0].score <= 0:
            _raise_missing(missing)
            raise PlannerUnavailable(
                "the offline planner (no model is configured) found no tool whose name or description matches "
                f"the words of the task. {CONFIGURE}"
            )
        try:
            chosen, why = _choose(ranked, mentions, index, self._fill)
        except PlannerUnavailable:
            _raise_missing(missing)
            raise
        matched, said = index.matched(chosen, mentions.user_text)
        if missing is not None and missing[1] > len(matched):
            _raise_missing(missing)
        if len(matched) * 2 <= len(said) and (said or not mentions.items):  # "what's in docs?" has no words
            raise PlannerUnavailable(
                f"the offline planner (no model is configured) found no tool that clearly matches the task: the "
                f"closest, {_label(chosen)}, matches {_quote(matched) or 'none'} of the words {_quote(said)} (it acts "
                f"only when the tool matches more than half of them). {CONFIGURE}"
            )
        filling = self._fill(chosen, mentions)
        problem = _problem(filling) or chosen.validation_error(filling.arguments)
        if problem is not None:
            asked = asking(chosen, filling, why, problem, mentions.base)
            raise Unfilled(
                f"the offline planner (no model is configured) understood {_label(chosen)} ({why}), but "
                f"{asked if isinstance(asked, str) else problem}. {CONFIGURE}",
                asked if isinstance(asked, Ask) else None,
            )
        return _plan(chosen, filling.arguments, why, catalog)


def _said(mentions: Mentions) -> set[str]:
    """The words (and synonyms) of the task that can name a tool; a question also says "list" and "read"."""
    return set(query_terms(mentions.user_text)) | (set(ASKED) if mentions.asks else set())


def rank(index: ToolIndex, mentions: Mentions) -> list[Ranked]:
    """The index's ranking of the task weighted by the name words the user said and by deprecation, best first."""
    said = _said(mentions)
    ranked = index.rank(mentions.terms())
    adjusted = []
    for r in ranked:
        if r.score <= 0:  # the rest score nothing either, and stay in the catalog's order
            break
        if mentions.asks and r.tool.name in index.destructive:
            adjusted.append(Ranked(r.tool, 0.0))
            continue
        name = index.name_words[r.tool.name]
        covered = len(name & said) / len(name) if name else 1.0
        factor = NAME_FLOOR + (1 - NAME_FLOOR) * covered
        if r.tool.name in index.deprecated:
            factor *= DEPRECATED_FACTOR
        adjusted.append(Ranked(r.tool, r.score * factor))
    return sorted(adjusted, key=lambda r: -r.score) + ranked[len(adjusted) :]


def hybrid(index: ToolIndex, mentions: Mentions, *, related: bool = True) -> list[Ranked]:
    """The hybrid ranking's best `CANDIDATES` tools for the task that score, a question's destructive tools left out;
    `related=False`: each tool's own score (`ToolIndex.search`)."""
    ranked = index.search(mentions.query, mentions.terms(), CANDIDATES, related=related)
    return [r for r in ranked if r.score > 0 and not (mentions.asks and r.tool.name in index.destructive)]


def _sure(index: ToolIndex, mentions: Mentions, alone: list[Ranked]) -> str | None:
    """Why the hybrid ranking's best tool may be taken (`confidence`), or None when it may not. Without the model,
    never: the words alone are what the rules already weighed."""
    if not alone or (len(alone) > 1 and alone[0].score <= alone[1].score):
        return None  # a tie (the same tool on two backends) is never broken by the catalog's order
    matched, said = index.matched(alone[0].tool, mentions.user_text)
    name = index.name_words[alone[0].tool.name] or frozenset(words(alone[0].tool.tool.name))  # `echo` of `echo`
    named = bool(name) and name <= set(words(mentions.user_text))
    if len(said) <= confidence.FEW_WORDS and len(matched) * 2 <= len(said) and not named:
        return None  # "login to the website" is not the login tests; "echo hi" names `echo` outright
    evidence = confidence.weigh(index, mentions.query, mentions.terms(), alone)
    sure = 0.0 if evidence is None else confidence.probability(evidence)
    return f"the hybrid ranking puts it first, {sure:.0%} likely right" if sure >= confidence.THRESHOLD else None


def _plan(chosen: CatalogTool, arguments: dict[str, Any], why: str, catalog: Catalog) -> Plan:
    return Plan(
        backend=chosen.backend,
        handle=chosen.handle,
        tool=chosen.tool.name,
        arguments=arguments,
        planner=OfflinePlanner.name,
        reasoning=f"offline: {why}",
        usage=PlanUsage(provider=OfflinePlanner.name, tools_offered=len(catalog)),
    )


def _needs(
    ask: Ask, candidates: list[dict[str, str]], catalog: Catalog, closest: str, mentions: Mentions
) -> NeedsArguments:
    instead = ask.missing.instead()
    message = (
        f"the offline planner (no model is configured) chose {_label(ask.tool)} ({ask.why}), but "
        f"{_problem(ask.filling)}. {instead[0].upper()}{instead[1:]}. {CONFIGURE}{closest}"
    )
    plan = _plan(ask.tool, ask.filling.arguments, ask.why, catalog)
    return needs(ask, message, plan, candidates, mentions.base)


def _short(tool: CatalogTool) -> str:
    text = " ".join((tool.tool.description or tool.tool.title or "").split())
    return text if len(text) <= SHORT else text[: SHORT - 3] + "..."


Filler = Callable[[CatalogTool, Mentions], Filling]


def _choose(ranked: list[Ranked], mentions: Mentions, index: ToolIndex, filler: Filler) -> tuple[CatalogTool, str]:
    best = ranked[0]
    runner_up = ranked[1].score if len(ranked) > 1 else 0.0
    if best.score >= MARGIN * runner_up:
        if not runner_up:
            return best.tool, "the only tool that matches"
        if (other := _takes_instead(ranked, mentions, index, filler)) is not None:
            return other, f"the best match, {_label(best.tool)}, cannot take what the task says, and it can"
        return best.tool, f"best match, {best.score / runner_up:.2f}x the score of the next tool"
    contenders = [r.tool for r in ranked if r.score * MARGIN > best.score]
    fillings = {t.name: filler(t, mentions) for t in contenders}
    callable_ = [t for t in contenders if fillings[t.name].complete]
    if callable_ == [best.tool]:
        return best.tool, "the only close match that can be called with what the task says"
    stray = fillings[best.tool.name].stray_ids
    if (
        len(callable_) == 1
        and stray
        and _takes_ids(callable_[0], fillings[callable_[0].name], best.tool, stray, mentions, index)
    ):
        return callable_[0], "the only close match that takes the ids the task writes"
    taking = [t for t in callable_ if fillings[t.name].placed]
    if len(taking) == 1 and fillings[taking[0].name].placed == len(mentions.values):
        return taking[0], "the only close match that takes every value the task mentions"
    as_is = [t for t in taking if not _list_of_one(fillings[t.name])]
    if len(as_is) == 1 and len(taking) > 1 and fillings[as_is[0].name].placed == len(mentions.values):
        return as_is[0], "the only close match that takes the value as it is, not as a list of one"
    choosing = [t for t in callable_ if fillings[t.name].chosen]
    if len(choosing) == 1 and not mentions.items and goal_request(mentions) is not None:  # "check that X works"
        return choosing[0], "the only close match that takes the choice the task names"
    if (family := _the_one_for_all(contenders, callable_, mentions, index)) is not None:
        return family, "the task names the kind of tool and none of them in particular, so the one for all"
    names = ", ".join(_label(t) for t in contenders[:4])
    raise PlannerUnavailable(
        f"the offline planner (no model is configured) cannot tell which tool fits best: {names} match the task "
        f"about equally well (it picks a tool only when its score is at least {MARGIN}x the next one's). " + CONFIGURE
    )


def _takes_instead(ranked: list[Ranked], mentions: Mentions, index: ToolIndex, filler: Filler) -> CatalogTool | None:
    """When the best tool can neither be called nor take the path or URL the task gives ("open notes.txt": not
    `browser_navigate`, which needs a URL), or cannot leave out what the task excludes ("run all the tests except
    checkout": not the tool for all of them), the best of the tools within `WIDE` of it (or of its backend, when
    they leave out what the task excludes) that can be called with every value the task gives, as they are (not as
    a list of one), when it is the only one or leads the next by `MARGIN`. Never a destructive one: a tool that
    ranks lower is not taken to change anything."""
    top = ranked[0]
    best = filler(top.tool, mentions)
    places = any(m.kind in PLACES for m in best.unplaced)
    # "read a.yaml and b.yaml in one go" ranked browser_navigate_back first, which takes no path at all
    placeless = places and not takes_role(top.tool.input_schema.get("properties") or {}, "path", "paths", "url")
    if not (places and (best.missing or placeless)) and not best.ignored and not best.stray_ids:
        return None  # a number or a quoted text could be meant for the best tool in a way it does not take
    # A tool of the same backend that leaves out what the task excludes is close however it ranks ("run the whole
    # suite, excluding checkout": the scenario runner, far below the tool for all on "whole" and "suite").
    close = [
        r
        for r in ranked[1:]
        if (r.score * WIDE > top.score or (best.ignored and r.tool.backend == top.tool.backend))
        and r.tool.name not in index.destructive
    ]
    fillings = [(r, filler(r.tool, mentions)) for r in close]
    fillings = [(r, f) for r, f in fillings if r.score * WIDE > top.score or f.left_out]
    if best.stray_ids:  # "run login-wrong-password on its own": the tool that takes it, if the task says its verb
        fillings = [(r, f) for r, f in fillings if _takes_ids(r.tool, f, top.tool, best.stray_ids, mentions, index)]
    taking = [(r, f) for r, f in fillings if f.complete and f.placed == len(mentions.values)]
    taking = [(r, f) for r, f in taking if not _list_of_one(f)] or taking
    if len(taking) == 1 or (taking and taking[0][0].score >= MARGIN * taking[1][0].score):
        return taking[0][0].tool
    return None


def _takes_ids(
    tool: CatalogTool, filling: Filling, best: CatalogTool, ids: tuple[str, ...], mentions: Mentions, index: ToolIndex
) -> bool:
    """Whether `tool` takes exactly the `ids` the task writes that the `best` tool cannot (no other choice: "run the
    login ones and login-wrong-password" also says the login tag), and says what the task asks to do as `best`
    does: the words of `best`'s name the task says (but the ids' own) are words of `tool`'s name, and it says one
    at least ("run login-wrong-password on its own": `run-arbigent-scenarios`; "show me settings-language" says no
    word of it, and is not run)."""
    if {str(v).lower() for v in filling.chosen} != {i.lower() for i in ids}:
        return False
    said = _said(mentions) - {w for i in ids for w in words(i)}
    own = index.name_words[tool.name]
    return bool(said & own) and said & index.name_words[best.name] <= own


def _the_one_for_all(
    contenders: list[CatalogTool], callable_: list[CatalogTool], mentions: Mentions, index: ToolIndex
) -> CatalogTool | None:
    """ "run the tests" names the family `run-arbigent-test-*` and no member of it: the one whose name the task
    says but for "all", when no contender's whole name is said and the task says nothing more than that name and
    words for all, and its backend's ("run the full (Arbigent) test suite"); "run the flaky tests" or "the test of
    the checkout" say more."""
    said = _said(mentions)
    if any(index.name_words[t.name] <= said for t in contenders):
        return None
    family = [t for t in callable_ if index.name_words[t.name] - said == ALL]
    if len(family) != 1:
        return None
    name = index.name_words[family[0].name]
    # small words too, those that ask for part of them ("run some tests"), not "please" or "the"
    every = {stem(w) for w in _WORD.findall(mentions.user_text.lower()) if w not in STOP_WORDS or w in SOME}
    rest = {s for s in every if s not in name and name.isdisjoint(SYNONYMS.get(s, ()))}
    return family[0] if rest <= ALL_WORDS | set(words(family[0].backend)) else None  # "the full Arbigent suite"


def _missing_fit(missing: tuple[MissingBackend, ...], text: str) -> tuple[MissingBackend, int] | None:
    """The unavailable backend that more than half of the task's words name (by its id and description),
    with how many of them it matches; the one matching most wins."""
    said = list(dict.fromkeys(words(text)))
    best: tuple[MissingBackend, int] | None = None
    for backend in missing:
        own = set(words(f"{backend.id} {backend.description}"))
        found = sum(1 for w in said if w in own or any(s in own for s in SYNONYMS.get(w, ())))
        if found * 2 > len(said) and (best is None or found > best[1]):
            best = (backend, found)
    return best


def _raise_missing(missing: tuple[MissingBackend, int] | None) -> None:
    if missing is None:
        return
    backend = missing[0]
    what = f" ({backend.description})" if backend.description else ""
    raise BackendUnavailable(
        f"this task is for backend {backend.id!r}{what}, which is unavailable ({backend.reason}), and no other "
        f"tool fits it, so nothing was run. Run `agentify doctor` or call list_backends to see why {backend.id!r} "
        "failed, fix it (its command, its dependencies), and try again."
    )


def _list_of_one(filling: Filling) -> bool:
    """Whether the filling wraps one mentioned value in a list (`paths: [one]`): a tool made for several."""
    return any(isinstance(v, list) and len(v) == 1 for v in filling.arguments.values())


def _problem(filling: Filling) -> str | None:
    if filling.ignored:
        what = "; ".join(repr(text) for text in filling.ignored)
        return f"it cannot leave out what the task excludes ({what}): the tool has no choice to leave it out by"
    if filling.missing:
        return "it cannot fill " + "; ".join(filling.missing) + " from the task or its context"
    if filling.unplaced:
        values = ", ".join(repr(m.text) for m in filling.unplaced)
        return f"it cannot tell which argument should take {values}"
    return None


def _quote(words: list[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


def _label(tool: CatalogTool) -> str:
    return f"{tool.backend}.{tool.tool.name}"
