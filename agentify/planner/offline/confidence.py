"""How sure the offline planner may be of the hybrid ranking's best tool when its rules refuse.

A logistic model over what the ranking shows of its best tool (`Evidence`): its score and how far it stands
above the next two, its cosine with the task and how far that stands above the runner-up's, how far the
catalog's best cosine stands above its second (meaning that singles one tool out), and whether the words
alone rank it first too. Its output is the probability that the tool is the right one, learnt from the public
sets' tuning parts (scripts/fit_retrieval.py --planner), each set weighing the square root of its queries; the
threshold is the one with the most right answers on average whose wrong answers stay at most
`fit_retrieval.MAX_WRONG` on every set.
The task's length, tried as a feature, made the short tasks typed in an IDE look unsure (the public sets'
queries are sentences), and was left out. Without the model there are no cosines, and the planner answers by
its rules alone.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass

from agentify.planner.retrieval import Ranked, ToolIndex


@dataclass(frozen=True)
class Evidence:
    score: float
    """The best tool's own hybrid score (`ToolIndex.search(related=False)`)."""
    lead: float
    """Its score less the second tool's."""
    lead_third: float
    """Its score less the third tool's."""
    cosine: float
    """The cosine of its vector with the task's."""
    cosine_lead: float
    """That cosine less the second tool's."""
    meaning_gap: float
    """How far the catalog's best cosine stands above its second best, whichever tools those are."""
    lexical_first: float
    """1 when the words alone rank it first too, else 0."""


INTERCEPT = -2.404
COEFFICIENTS = Evidence(
    score=0.954,
    lead=1.012,
    lead_third=1.162,
    cosine=1.104,
    cosine_lead=0.709,
    meaning_gap=0.674,
    lexical_first=1.116,
)
THRESHOLD = 0.61
"""The least probability at which the planner takes the best tool."""
FEW_WORDS = 2
"""A task of this many words or fewer is answered only by a tool that matches more than half of them, as the rules
require of every task: the model learnt from the public sets' sentences, where a word the tool leaves out weighs
little, and "login to the website" is not the login tests. A task that names the tool outright ("echo hi") is
exempt. With it, the refitted model's held-out figures moved by less than half a point."""


def weigh(index: ToolIndex, text: str, terms: dict[str, float], alone: list[Ranked]) -> Evidence | None:
    """The evidence for `alone[0]`, the best of `alone` (each tool's own scores, best first); None without the
    model or a tool."""
    if not alone:
        return None
    meaning = index.meaning(text, [r.tool for r in alone[:2]])
    if meaning is None:
        return None
    cosines, gap = meaning
    scores = [r.score for r in alone[:3]] + [0.0, 0.0]
    return Evidence(
        score=scores[0],
        lead=scores[0] - scores[1],
        lead_third=scores[0] - scores[2],
        cosine=cosines[0],
        cosine_lead=cosines[0] - (cosines[1:] or [0.0])[0],
        meaning_gap=gap,
        lexical_first=float(index.lexical_best(terms) == alone[0].tool),
    )


def probability(evidence: Evidence, intercept: float | None = None, coefficients: Evidence | None = None) -> float:
    """The fitted model's probability that the evidence's tool is the right one."""
    weights = astuple(COEFFICIENTS if coefficients is None else coefficients)
    z = (INTERCEPT if intercept is None else intercept) + sum(
        w * x for w, x in zip(weights, astuple(evidence), strict=True)
    )
    if not math.isfinite(z):
        return 0.0  # evidence that is not a number is no evidence
    return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))
