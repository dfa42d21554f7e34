"""Fit the hybrid ranking's weights (`retrieval.FITTED`) on the tuning parts of the public sets.

A grid search over the weight of a name's words against a description's, and the weights of the
lexical score, the name-coverage bonuses, the backend's best tool and the id-finding tools
(scale: semantic = 1). The
objective is the mean over the sets of (recall@1 + recall@5) / 2 of `search_tools`, each set
counting alike however many queries it has. Only the tuning parts are read (`public.part`); the
held-out parts and the project's own sets are never seen. Prints the best weights to copy into
agentify/planner/retrieval.py.

With --adaptive, it keeps those weights and fits instead how the lexical score's weight grows with
the query's length (`Weights.lexical_long`): the same objective, and the least
set's figure beside it, so that no set's gain is bought with another's loss.

With --requests, it keeps the other weights and fits how much a multi-request query's open requests
pull the next places of `search_tools` (`search.OPEN_REQUESTS`), with the backend's weight beside it (the
two both fill the places after the first): the same objective, and the least set's figure.

With --planner, it calibrates the offline planner instead (`offline.confidence`, with the weights as
they are in the code): a logistic model of whether the hybrid ranking's best tool is right, fitted on
the single-tool tuning queries that the rules give no complete plan for (each set weighing the square
root of its queries), and the least
probability at which the planner takes it: the one with the most right complete plans on average
whose wrong ones stay at most `MAX_WRONG` on each set. The project's own sets
(tests/planner/test_offline.py) may rule it out.

    .venv/bin/python scripts/fit_retrieval.py [--sets metatool toolalpaca restbench toolbench] [--adaptive]
        [--requests] [--planner]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from dataclasses import astuple, replace

from agentify.eval.public import PublicSet, Ranking, available, load_public, summary
from agentify.planner import search
from agentify.planner.retrieval import FITTED, ToolIndex, Weights
from agentify.planner.search import search_tools

NAMES = (0.5, 1.0)
LEXICAL = (0.2, 0.3, 0.5)
COVERAGE = (0.1, 0.2)
WHOLE_NAME = (0.0, 0.1)
BACKEND = (0.0, 0.3, 0.5)
PROVIDER = (0.0, 0.97)
ADAPTIVE_LEXICAL = (0.2, 0.3, 0.4)
LONG = (0.0, 0.3, 0.6, 0.9)
OPEN_WEIGHTS = (0.0, 0.03, 0.05, 0.1, 0.2, 0.3)
OPEN_BACKEND = (0.3, 0.5, 0.6, 0.7, 0.85, 1.0, 1.3)
DEPTH = 10
MAX_WRONG = 0.08  # on each set, below the target of 10 %, to leave room for sets the fit has not seen
THRESHOLDS = tuple(i / 100 for i in range(40, 96))
STEPS, RATE, L2 = 4000, 1.0, 0.01
FINAL = ("right", "wrong")  # the rules' complete plans: the ranking is not asked after them


async def _verdict(planner_: object, task: object, catalog: object, tools: object) -> str:
    """The plan's verdict by its tool: right or wrong (prefixed "ask" for a plan that would ask for arguments), or
    refused."""
    from agentify.errors import AgentifyError
    from agentify.planner import NeedsArguments

    try:
        plan, asks = await planner_.plan(task, catalog), ""  # type: ignore[attr-defined]
    except NeedsArguments as asking:
        plan, asks = asking.plan, "ask"
    except AgentifyError:
        return "refused"
    return asks + ("right" if (plan.backend, plan.tool) in tools else "wrong")  # type: ignore[operator]


async def calibrate(sets: list[PublicSet]) -> None:
    """Fit `confidence.COEFFICIENTS` (a logistic model, each set weighing the square root of its rows) on the
    single-tool tuning queries the rules give no complete plan for and the hybrid ranking's best tool would answer,
    then the threshold: the most right complete plans on average with at most `MAX_WRONG` wrong on each set."""
    import numpy as np

    from agentify.planner import TaskInput
    from agentify.planner.offline import OfflinePlanner, confidence, planner

    shipped = confidence.THRESHOLD
    rows: dict[str, list[tuple[str, str, confidence.Evidence | None]]] = {}
    # per set: (the rules' verdict, the verdict when the best tool is taken, its evidence)
    for public in sets:
        catalog = public.catalog()
        index = ToolIndex(catalog)
        found = rows.setdefault(public.name, [])
        for query in public.select("tune"):
            if len(query.tools) != 1:
                continue
            task = TaskInput(query=query.text)
            verdicts = []
            for threshold in (float("inf"), 0.0):
                confidence.THRESHOLD = threshold
                verdicts.append(await _verdict(OfflinePlanner(), task, catalog, query.tools))
            mentions = planner.analyse(task)
            alone = planner.hybrid(index, mentions, related=False)
            found.append((verdicts[0], verdicts[1], confidence.weigh(index, mentions.query, mentions.terms(), alone)))
    confidence.THRESHOLD = shipped
    # The ranking is asked whenever the rules give no complete plan (a plan that would ask is not one yet).
    pool = [(name, taken, e) for name, rs in rows.items() for rules, taken, e in rs if rules not in FINAL and e]
    pool = [(name, taken, e) for name, taken, e in pool if taken != "refused"]
    x = np.array([[1.0, *astuple(e)] for _, _, e in pool])
    y = np.array([taken.endswith("right") for _, taken, _ in pool], dtype=float)
    # Each set weighs the square root of its rows: MetaTool's 523 rows do not drown RestBench's 5, nor do those 5
    # weigh as much as the 523 (each set alike: 0.341 on the objective below; each row alike: 0.344; this: 0.345).
    weight = np.array([sum(1 for n, _, _ in pool if n == name) ** -0.5 for name, _, _ in pool])
    weight *= len(weight) / weight.sum()
    beta = np.zeros(x.shape[1])
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-x @ beta))
        beta -= RATE * (x.T @ (weight * (p - y)) / len(y) + L2 * np.r_[0.0, beta[1:]])
    intercept, coefficients = round(float(beta[0]), 3), confidence.Evidence(*(round(float(b), 3) for b in beta[1:]))
    print(f"INTERCEPT = {intercept}\nCOEFFICIENTS = {coefficients}")
    results = []
    for threshold in THRESHOLDS:
        shares = {}
        for name, rs in rows.items():
            got = [
                taken
                if rules not in FINAL and e and confidence.probability(e, intercept, coefficients) >= threshold
                else rules
                for rules, taken, e in rs
            ]
            shares[name] = (got.count("right") / (len(got) or 1), got.count("wrong") / (len(got) or 1))
        fits = all(wrong <= MAX_WRONG for _, wrong in shares.values())
        results.append((fits, sum(right for right, _ in shares.values()) / len(shares), threshold, shares))
    for fits, mean, threshold, shares in results:
        mark = "" if fits else " (wrong above MAX_WRONG)"
        each = ", ".join(f"{name} {right:.3f} / {wrong:.3f}" for name, (right, wrong) in shares.items())
        print(f"THRESHOLD = {threshold:.2f}: mean right {mean:.3f}{mark}; right / wrong: {each}")
    best = max((r for r in results if r[0]), key=lambda r: r[1], default=None)
    print(f"best: THRESHOLD = {best[2]:.2f}" if best else "no threshold keeps every set's wrong answers low enough")


def score(public: PublicSet, weights: Weights) -> float:
    """(recall@1 + recall@5) / 2 of `search_tools` over the set's tuning part."""
    index = ToolIndex(public.catalog(), weights)
    key = {(t.backend, t.tool.name): t.name for t in index.catalog.tools.values()}
    rankings = [
        Ranking.of([r.tool.name for r in search_tools(index, q.text, DEPTH)], [key[t] for t in q.tools])
        for q in public.select("tune")
    ]
    s = summary(rankings)
    return (float(s["recall@1"] or 0) + float(s["recall@5"] or 0)) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=[n for n in available() if not load_public(n).check])
    parser.add_argument("--adaptive", action="store_true", help="fit how the lexical weight follows the query")
    parser.add_argument("--requests", action="store_true", help="fit the pull of a query's open requests")
    parser.add_argument("--planner", action="store_true", help="calibrate the offline planner's confidence")
    args = parser.parse_args()
    sets = [load_public(name) for name in args.sets]
    if args.planner:
        asyncio.run(calibrate(sets))
        return
    results = []
    if args.requests:
        for pull, backend in itertools.product(OPEN_WEIGHTS, OPEN_BACKEND):
            search.OPEN_REQUESTS = pull
            per_set = [score(public, replace(FITTED, backend=backend)) for public in sets]
            objective = sum(per_set) / len(per_set)
            print(f"{objective:.4f} min {min(per_set):.3f} open requests {pull} backend {backend}", per_set, flush=True)
        return
    if args.adaptive:
        grid = [
            replace(FITTED, lexical=lexical, lexical_long=long)
            for lexical, long in itertools.product(ADAPTIVE_LEXICAL, LONG)
        ]
    else:
        grid = [
            Weights(name_weight, lexical, 1.0, coverage, whole, backend, provider)
            for name_weight, lexical, coverage, whole, backend, provider in itertools.product(
                NAMES, LEXICAL, COVERAGE, WHOLE_NAME, BACKEND, PROVIDER
            )
        ]
    for weights in grid:
        per_set = [score(public, weights) for public in sets]
        objective = sum(per_set) / len(per_set)
        results.append((objective, weights, per_set))
        print(f"{objective:.4f} min {min(per_set):.3f} {weights} {' '.join(f'{x:.3f}' for x in per_set)}", flush=True)
    results.sort(key=lambda r: -r[0])
    print("best:")
    for objective, weights, per_set in results[:5]:
        print(f"  {objective:.4f} {weights} {per_set}")


if __name__ == "__main__":
    main()
