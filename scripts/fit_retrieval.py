"""Fit the hybrid ranking's weights (`retrieval.FITTED`) on the tuning parts of the public sets.

A grid search over the weight of a name's words against a description's, and the weights of the
lexical score, the name-coverage bonus and the semantic similarity (scale: semantic = 1). The
objective is the mean over the sets of (recall@1 + recall@5) / 2 of `search_tools`, each set
counting alike however many queries it has. Only the tuning parts are read (`public.part`); the
held-out parts and the project's own sets are never seen. Prints the best weights to copy into
agentify/planner/retrieval.py.

    .venv/bin/python scripts/fit_retrieval.py [--sets metatool toolalpaca restbench]
"""

from __future__ import annotations

import argparse
import itertools

from agentify.eval.public import Ranking, available, load_public, summary
from agentify.planner.retrieval import ToolIndex, Weights
from agentify.planner.search import search_tools

NAMES = (0.5, 1.0, 1.5, 2.0, 3.0)
LEXICAL = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5)
COVERAGE = (0.0, 0.05, 0.1, 0.2, 0.3)
DEPTH = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=available())
    args = parser.parse_args()
    sets = [load_public(name) for name in args.sets]
    results = []
    for name_weight, lexical, coverage in itertools.product(NAMES, LEXICAL, COVERAGE):
        weights = Weights(name=name_weight, lexical=lexical, semantic=1.0, coverage=coverage)
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
