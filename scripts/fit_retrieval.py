"""Fit the hybrid ranking's weights (`retrieval.FITTED`) on the tuning parts of the public sets.

A grid search over the weight of a name's words against a description's, and the weights of the
lexical score, the name-coverage bonuses and the semantic similarity (scale: semantic = 1). The
objective is the mean over the sets of (recall@1 + recall@5) / 2 of `search_tools`, each set
counting alike however many queries it has. Only the tuning parts are read (`public.part`); the
held-out parts and the project's own sets are never seen. Prints the best weights to copy into
agentify/planner/retrieval.py.

With --planner, it calibrates the offline planner instead (`offline.planner.CONFIDENT`, with the
weights as they are in the code): the lowest lead of the best tool over the next whose wrong
answers, pooled over the single-tool queries of the tuning parts, stay at most `MAX_WRONG`.

    .venv/bin/python scripts/fit_retrieval.py [--sets metatool toolalpaca restbench] [--planner]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

from agentify.eval.public import PublicSet, Ranking, available, load_public, summary
from agentify.planner.retrieval import ToolIndex, Weights
from agentify.planner.search import search_tools

NAMES = (0.5, 1.0, 2.0)
LEXICAL = (0.2, 0.3, 0.5)
COVERAGE = (0.0, 0.1, 0.2)
WHOLE_NAME = (0.0, 0.1, 0.2, 0.4)
DEPTH = 10
MAX_WRONG = 0.06  # below the target of 10 %, to leave room for sets the fit has not seen
LEADS = tuple(i / 100 for i in range(101))


async def calibrate(sets: list[PublicSet]) -> None:
    from agentify.errors import AgentifyError
    from agentify.planner import TaskInput
    from agentify.planner.offline import OfflinePlanner, planner

    outcomes = []  # (rules' verdict or None when they refused, the lead, the verdict when taken)
    for public in sets:
        catalog = public.catalog()
        index = ToolIndex(catalog)
        for query in public.select("tune"):
            if len(query.tools) != 1:
                continue
            task = TaskInput(query=query.text)
            verdicts = []
            for threshold in (float("inf"), 0.0):
                planner.CONFIDENT = threshold
                try:
                    plan = await OfflinePlanner().plan(task, catalog)
                    verdicts.append("right" if (plan.backend, plan.tool) in query.tools else "wrong")
                except AgentifyError:
                    verdicts.append("refused")
            mentions = planner.analyse(task)
            lead = planner.confidence(index.search(mentions.query, mentions.terms(), planner.CANDIDATES)) or 0.0
            outcomes.append((None if verdicts[0] == "refused" else verdicts[0], lead, verdicts[1]))
    best = None
    for threshold in LEADS:
        got = [rules or (taken if lead >= threshold else "refused") for rules, lead, taken in outcomes]
        right, wrong = got.count("right") / len(got), got.count("wrong") / len(got)
        print(f"lead >= {threshold:.2f}: right {right:.3f} wrong {wrong:.3f} ({len(got)} queries)")
        if best is None and wrong <= MAX_WRONG:
            best = (threshold, right, wrong)
    print(f"CONFIDENT = {best[0]:.2f}  (right {best[1]:.3f}, wrong {best[2]:.3f})" if best else "no threshold fits")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=available())
    parser.add_argument("--planner", action="store_true", help="calibrate the offline planner's confidence")
    args = parser.parse_args()
    sets = [load_public(name) for name in args.sets]
    if args.planner:
        asyncio.run(calibrate(sets))
        return
    results = []
    for name_weight, lexical, coverage, whole in itertools.product(NAMES, LEXICAL, COVERAGE, WHOLE_NAME):
        weights = Weights(name=name_weight, lexical=lexical, semantic=1.0, coverage=coverage, whole_name=whole)
        per_set = []
        for public in sets:
            index = ToolIndex(public.catalog(), weights)
            key = {(t.backend, t.tool.name): t.name for t in index.catalog.tools.values()}
            rankings = [
                Ranking.of([r.tool.name for r in search_tools(index, q.text, DEPTH)], [key[t] for t in q.tools])
                for q in public.select("tune")
            ]
            s = summary(rankings)
            per_set.append((float(s["recall@1"] or 0) + float(s["recall@5"] or 0)) / 2)
        objective = sum(per_set) / len(per_set)
        results.append((objective, weights, per_set))
        print(f"{objective:.4f} {weights} {' '.join(f'{x:.3f}' for x in per_set)}", flush=True)
    results.sort(key=lambda r: -r[0])
    print("best:")
    for objective, weights, per_set in results[:5]:
        print(f"  {objective:.4f} {weights} {per_set}")


if __name__ == "__main__":
    main()
