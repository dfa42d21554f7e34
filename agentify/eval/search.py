"""`agentify eval --mode search`: how well `search_tools` finds the right tool for a labelled task.

For each case the query alone (as the IDE's model would send it) goes to the same ranking as
`search_tools`; the case counts at k when the expected tool is among the first k answers.
Reported: recall at 1, 3 and the `--limit` k (5 by default), and the size of what the IDE's
model reads: a `search_tools` answer of k tools against the schemas of the whole catalog
(what a client without tool search is sent), both as JSON length / 4 (no tokenizer).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentify.eval.routing import Backends, Case, EvalServices, gateway_catalog
from agentify.mcp_server.results import search_result
from agentify.planner.retrieval import ToolIndex
from agentify.planner.search import search_tools
from agentify.security.redact import Redactor

DEPTH = 50  # how far down the ranking a miss is looked for, to report where the tool was


@dataclass(frozen=True, kw_only=True)
class SearchCase:
    case: Case
    rank: int | None
    """1-based place of the expected tool in the search answer; None when not in the first `DEPTH`."""
    found: tuple[str, ...]
    """The names of the first k tools returned."""
    answer_tokens: int


@dataclass(frozen=True, kw_only=True)
class SearchReport:
    k: int
    catalog_size: int
    catalog_tokens: int
    results: list[SearchCase]

    def recall(self, k: int) -> float:
        hits = [r.rank is not None and r.rank <= k for r in self.results]
        return sum(hits) / len(hits) if hits else 0.0

    @property
    def mean_answer_tokens(self) -> float:
        return sum(r.answer_tokens for r in self.results) / len(self.results) if self.results else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "mode": "search",
            "k": self.k,
            "recall": {str(k): self.recall(k) for k in sorted({1, 3, self.k})},
            "catalogTools": self.catalog_size,
            "estimatedTokens": {
                "searchAnswer": round(self.mean_answer_tokens),
                "allSchemas": self.catalog_tokens,
                "method": "JSON length / 4",
            },
            "results": [
                {
                    "line": r.case.line,
                    "query": r.case.task.query,
                    "expected": r.case.expected(),
                    "rank": r.rank,
                    "found": list(r.found),
                }
                for r in self.results
            ],
        }

    def lines(self) -> list[str]:
        out = [f"search_tools on {self.catalog_size} tools, k = {self.k}", ""]
        for r in self.results:
            if r.rank is None or r.rank > self.k:
                where = f"at {r.rank}" if r.rank else f"not in the first {DEPTH}"
                out.append(f"{r.case.line:>3}  miss ({where})  {r.case.task.query}")
                out.append(f"     expected {r.case.backend}.{'|'.join(r.case.tools)}; got {', '.join(r.found)}")
        total = len(self.results)
        for k in sorted({1, 3, self.k}):
            hits = round(self.recall(k) * total)
            out.append(f"recall at {k}: {hits}/{total} = {self.recall(k):.1%}")
        share = self.mean_answer_tokens / self.catalog_tokens if self.catalog_tokens else 0.0
        out.append(
            f"tokens, estimated (JSON length / 4): a search answer of {self.k} tools {self.mean_answer_tokens:.0f}, "
            f"every tool's schema {self.catalog_tokens} ({share:.1%} of it)"
        )
        return out


def evaluate_search(index: ToolIndex, cases: Sequence[Case], k: int) -> SearchReport:
    catalog = index.catalog
    whole = [
        {"name": t.name, "description": t.tool.description or "", "inputSchema": t.input_schema}
        for t in catalog.tools.values()
    ]
    results = []
    for case in cases:
        ranked = search_tools(index, case.task.query, max(k, DEPTH))
        place = next(
            (i for i, r in enumerate(ranked, 1) if r.tool.backend == case.backend and r.tool.tool.name in case.tools),
            None,
        )
        answer = search_result(case.task.query, ranked[:k], Redactor())
        text = "".join(getattr(block, "text", "") for block in answer.content)
        results.append(
            SearchCase(
                case=case,
                rank=place,
                found=tuple(r.tool.name for r in ranked[:k]),
                answer_tokens=math.ceil(len(text) / 4),
            )
        )
    return SearchReport(
        k=k, catalog_size=len(catalog), catalog_tokens=math.ceil(len(json.dumps(whole)) / 4), results=results
    )


async def evaluate_gateway_search(
    gateway: EvalServices, cases: Sequence[Case], extra: Backends, k: int
) -> SearchReport:
    """`evaluate_search` on the gateway's backends plus `extra` recorded ones. Raises EvalFileError on an id clash."""
    catalog = await gateway_catalog(gateway, extra)
    return evaluate_search(gateway.planners.current.index(catalog), cases, k)
