"""Public tool-retrieval sets: loading, the tune / held-out split, and the plain BM25 baseline.

A set (agentify/eval/data/public/NAME.json, written by scripts/convert_public_sets.py) holds
recorded backends and queries labelled with every tool they need (`"<backend>/<tool>"`). Each
query belongs to the tuning part or the held-out part by a hash of its text (`part`), so the split
is the same on every machine and a new query never moves an old one. Weights are fitted on the
tuning parts only (scripts/fit_retrieval.py); figures are reported on the held-out parts. A check
set (`"check": true`, such as toolbench) is held out whole: it has no tuning part, so nothing is
ever fitted on it, and it tells whether what was fitted on the others carries over.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from agentify.eval.arguments import matches
from agentify.eval.routing import Backends, EvalFileError
from agentify.planner.catalog import Catalog, CatalogTool

DATA = Path(__file__).parent / "data" / "public"
TUNE_SHARE = 40  # of 100: the tuning part; the other 60 are held out
PARTS = ("heldout", "tune", "all")


@dataclass(frozen=True)
class Query:
    text: str
    tools: tuple[tuple[str, str], ...]
    """(backend, tool) of every tool the query needs."""
    arguments: Mapping[str, Sequence[Any]] | None = field(default=None, compare=False)
    """Where the set labels them (bfcl-live), the values each argument of the query's one tool accepts (`""`: it
    may be left out); see `arguments.matches`."""

    @property
    def part(self) -> str:
        return part(self.text)


@dataclass(frozen=True)
class PublicSet:
    name: str
    source: dict[str, Any]
    backends: Backends
    queries: list[Query]
    check: bool = False
    """Held out whole: every query is in the held-out part and none in the tuning part."""

    def catalog(self) -> Catalog:
        return Catalog.build(self.backends)

    def select(self, which: str, sample: int | None = None) -> list[Query]:
        """The queries of one part (`heldout`, `tune` or `all`); with `sample`, n of them spread evenly over it."""
        chosen = [q for q in self.queries if which == "all" or (q.part if not self.check else "heldout") == which]
        if sample is None or sample >= len(chosen):
            return chosen
        return [chosen[i * len(chosen) // sample] for i in range(sample)]


def part(text: str) -> str:
    """`tune` or `heldout`, by the query's text alone."""
    bucket = int(hashlib.sha256(text.strip().lower().encode()).hexdigest()[:8], 16) % 100
    return "tune" if bucket < TUNE_SHARE else "heldout"


def available() -> list[str]:
    """The names of the shipped sets."""
    return sorted(p.stem for p in DATA.glob("*.json"))


def load_public(name_or_path: str) -> PublicSet:
    """A shipped set by name (`metatool`), or a converted file by path. Raises EvalFileError."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = DATA / f"{name_or_path}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        backends = [
            (str(b["id"]), str(b.get("description") or ""), [types.Tool.model_validate(t) for t in b["tools"]])
            for b in data["backends"]
        ]
        queries = [
            Query(
                str(q["query"]),
                tuple(tuple(t.split("/", 1)) for t in q["tools"]),  # type: ignore[misc]
                _accepted(q["arguments"]) if q.get("arguments") is not None else None,
            )
            for q in data["queries"]
        ]
    except OSError as exc:
        shipped = ", ".join(available())
        raise EvalFileError(f"{path} cannot be read ({exc.strerror}); the shipped public sets are: {shipped}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, ValidationError) as exc:
        raise EvalFileError(
            f"{path} is not a public set ({type(exc).__name__}: {str(exc)[:200]}); expected "
            '{"backends": [...], "queries": [{"query": ..., "tools": ["<backend>/<tool>", ...]}]}'
        ) from None
    if not queries or any(len(t) != 2 for q in queries for t in q.tools):
        raise EvalFileError(f'{path}: every query needs "tools": ["<backend>/<tool>", ...]')
    return PublicSet(
        str(data.get("name") or path.stem), dict(data.get("source") or {}), backends, queries, data.get("check") is True
    )


def _accepted(arguments: Any) -> dict[str, list[Any]]:
    """A query's labelled arguments: each name with the list of values it accepts (one value is a list of one).

    Raises:
        TypeError: `arguments` is not an object.
    """
    if not isinstance(arguments, dict):
        raise TypeError(f'"arguments" must be an object of accepted values, not {type(arguments).__name__}')
    return {str(k): v if isinstance(v, list) else [v] for k, v in arguments.items()}


_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def plain_tokens(text: str) -> list[str]:
    """The baseline's tokens: lower-cased letters and digits, identifiers split; no stemming, no stop words."""
    return _TOKEN.findall(_CAMEL.sub(" ", text).lower())


def tool_text(tool: CatalogTool) -> str:
    """Everything a tool says of itself: the text both the baseline and agentify's index read."""
    parameters = " ".join(
        f"{name} {spec.get('description') or ''}" if isinstance(spec, dict) else name
        for name, spec in (tool.input_schema.get("properties") or {}).items()
    )
    return " ".join([tool.tool.name, tool.tool.description or "", parameters, tool.backend, tool.backend_description])


class BM25Baseline:
    """Okapi BM25 (rank_bm25, k1 1.5, b 0.75) over `tool_text`, tokenised by `plain_tokens`."""

    def __init__(self, catalog: Catalog) -> None:
        from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

        self._tools = list(catalog.tools.values())
        self._bm25 = BM25Okapi([plain_tokens(tool_text(t)) or ["_"] for t in self._tools])

    def rank(self, query: str) -> list[CatalogTool]:
        scores = self._bm25.get_scores(plain_tokens(query))
        order = sorted(range(len(self._tools)), key=lambda i: (-scores[i], i))
        return [self._tools[i] for i in order]


@dataclass(frozen=True)
class Ranking:
    """Where each tool a query needs was placed by one ranking (1-based; None: not in it)."""

    places: tuple[int | None, ...]

    @classmethod
    def of(cls, order: list[str], needed: list[str]) -> Ranking:
        position = {name: i for i, name in enumerate(order, 1)}
        return cls(tuple(position.get(name) for name in needed))

    def recall(self, k: int) -> float:
        """The share of the needed tools in the first k, out of as many as fit there."""
        found = sum(1 for p in self.places if p is not None and p <= k)
        return found / min(len(self.places), k)

    def ndcg(self, k: int) -> float:
        gain = sum(1 / math.log2(p + 1) for p in self.places if p is not None and p <= k)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(self.places), k)))
        return gain / ideal

    def complete(self, k: int) -> bool:
        return all(p is not None and p <= k for p in self.places)


def summary(rankings: list[Ranking]) -> dict[str, float | int | None]:
    """recall@1/5/10 and NDCG@5 over every query; all-needed-in-top-5 over the multi-tool ones."""
    multi = [r for r in rankings if len(r.places) > 1]
    n = len(rankings) or 1
    return {
        "queries": len(rankings),
        "recall@1": sum(r.recall(1) for r in rankings) / n,
        "recall@5": sum(r.recall(5) for r in rankings) / n,
        "recall@10": sum(r.recall(10) for r in rankings) / n,
        "ndcg@5": sum(r.ndcg(5) for r in rankings) / n,
        "multiTool": len(multi),
        "allInTop5": sum(r.complete(5) for r in multi) / len(multi) if multi else None,
    }


DEPTH = 10  # how far down each ranking a needed tool is looked for


@dataclass(frozen=True, kw_only=True)
class SetReport:
    """One public set's part: `search_tools` and plain BM25 side by side, the offline planner, the shortlist."""

    name: str
    source: dict[str, Any]
    part: str
    catalog_size: int
    check: bool
    """A check set: held out whole, nothing was fitted on it."""
    semantic: bool
    agentify: dict[str, float | int | None]
    bm25: dict[str, float | int | None]
    planner: dict[str, int]
    """Single-tool queries: right and wrong complete plans, refused (no_plan), total; `askedRight` and `askedWrong`
    are apart from them: plans that chose their tool but would ask the user for arguments the query does not say
    (`NeedsArguments`), right or wrong by that tool. Where the set labels arguments, `labelled` counts the single-tool
    queries it labels, `rightLabelled` the complete plans right among them, and `rightArguments` those whose arguments
    are among the accepted ones."""
    shortlist: dict[str, float | int]
    """Share of queries whose every needed tool the model planner's shortlist holds, and its mean size."""

    def as_json(self) -> dict[str, Any]:
        return {
            "set": self.name,
            "checkSet": self.check,
            "source": self.source,
            "part": self.part,
            "catalogTools": self.catalog_size,
            "ranking": "semantic + lexical" if self.semantic else "lexical only",
            "searchTools": self.agentify,
            "bm25": self.bm25,
            "offlinePlanner": self.planner,
            "shortlist": self.shortlist,
        }


async def evaluate_public(public: PublicSet, which: str, k: int, sample: int | None = None) -> SetReport:
    """Every query of one part searched (agentify's `search_tools` and the BM25 baseline), planned by the
    offline planner (single-tool queries) and shortlisted for a model planner of base size `k`."""
    from agentify.errors import AgentifyError
    from agentify.planner import NeedsArguments, TaskInput
    from agentify.planner.indexes import IndexCache
    from agentify.planner.offline import OfflinePlanner
    from agentify.planner.search import search_tools
    from agentify.planner.shortlist import shortlist

    catalog = public.catalog()
    indexes = IndexCache()
    index = indexes.get(catalog)
    planner = OfflinePlanner(indexes)
    baseline = BM25Baseline(catalog)
    key = {(t.backend, t.tool.name): t.name for t in catalog.tools.values()}
    ours, theirs = [], []
    verdicts = {"right": 0, "wrong": 0, "refused": 0, "total": 0, "askedRight": 0, "askedWrong": 0}
    if any(q.arguments is not None for q in public.queries):
        verdicts |= {"labelled": 0, "rightLabelled": 0, "rightArguments": 0}
    held = {"single": [0, 0], "multi": [0, 0]}
    sizes = 0
    queries = public.select(which, sample)
    for query in queries:
        needed = [key[t] for t in query.tools if t in key]
        ours.append(Ranking.of([r.tool.name for r in search_tools(index, query.text, DEPTH)], needed))
        theirs.append(Ranking.of([t.name for t in baseline.rank(query.text)[:DEPTH]], needed))
        task = TaskInput(query=query.text)
        offered = {t.name for t in shortlist(index, task, k)}
        kind = held["single" if len(needed) == 1 else "multi"]
        kind[0] += all(n in offered for n in needed)
        kind[1] += 1
        sizes += len(offered)
        if len(needed) == 1:
            verdicts["total"] += 1
            if query.arguments is not None:
                verdicts["labelled"] += 1
            asks = False
            try:
                plan = await planner.plan(task, catalog)
            except NeedsArguments as asking:  # the plan commits to its tool: counted by it
                plan, asks = asking.plan, True
            except AgentifyError:
                verdicts["refused"] += 1
                continue
            chosen = catalog.get(f"{plan.backend}__{plan.tool}")
            right = (plan.backend, plan.tool) in query.tools or (chosen is not None and chosen.name in needed)
            verdicts[("askedRight" if right else "askedWrong") if asks else ("right" if right else "wrong")] += 1
            if query.arguments is not None and right and not asks:
                verdicts["rightLabelled"] += 1
                verdicts["rightArguments"] += matches(plan.arguments, query.arguments)
    n = len(queries) or 1
    return SetReport(
        name=public.name,
        check=public.check,
        source=public.source,
        part=which,
        catalog_size=len(catalog),
        semantic=index.semantic,
        agentify=summary(ours),
        bm25=summary(theirs),
        planner=verdicts,
        shortlist={
            "holdsRight": held["single"][0] / (held["single"][1] or 1),
            "holdsAllOfMulti": held["multi"][0] / (held["multi"][1] or 1),
            "meanSize": sizes / n,
            "baseK": k,
        },
    )


def report_lines(reports: list[SetReport]) -> list[str]:
    """The text report: one block per set, agentify beside BM25."""
    out: list[str] = []
    for r in reports:
        which = "check set, held out whole" if r.check else f"{r.part} part"
        out.append(
            f"{r.name} ({which}, {r.agentify['queries']} queries, {r.agentify['multiTool']} multi-tool; "
            f"{r.catalog_size} tools; {'semantic + lexical' if r.semantic else 'lexical only'}) "
            f"from {r.source.get('repo', '?')} @ {str(r.source.get('commit', '?'))[:12]}, "
            f"{r.source.get('licence', '?')}"
        )
        out.append(f"  {'':<22}{'search_tools':>14}{'BM25':>10}")
        for metric in ("recall@1", "recall@5", "recall@10", "ndcg@5", "allInTop5"):
            a, b = r.agentify[metric], r.bm25[metric]
            if a is None or b is None:
                continue
            label = "all needed in top 5" if metric == "allInTop5" else metric
            out.append(f"  {label:<22}{a:>14.3f}{b:>10.3f}")
        p = r.planner
        total = p["total"] or 1
        out.append(
            f"  offline planner, {p['total']} single-tool queries: complete plans right {p['right'] / total:.1%}, "
            f"wrong {p['wrong'] / total:.1%}; refused {p['refused'] / total:.1%}"
        )
        if "labelled" in p:
            out.append(
                f"  on the {p['labelled']} whose arguments the set labels: {p['rightLabelled']} complete plans right, "
                f"{p['rightArguments']} of them with every argument as the set's answer"
            )
        out.append(
            f"  plans that ask the user for arguments: right {p['askedRight'] / total:.1%}, wrong "
            f"{p['askedWrong'] / total:.1%} (with them: right {(p['right'] + p['askedRight']) / total:.1%}, wrong "
            f"{(p['wrong'] + p['askedWrong']) / total:.1%})"
        )
        s = r.shortlist
        multi = (
            f", every needed tool of {s['holdsAllOfMulti']:.1%} of multi-tool ones" if r.agentify["multiTool"] else ""
        )
        out.append(
            f"  model planner's shortlist (base k = {s['baseK']}, mean {s['meanSize']:.1f} tools) holds the right tool "
            f"of {s['holdsRight']:.1%} of single-tool queries{multi}"
        )
        out.append("")
    return out


def load_many(names: str) -> list[PublicSet]:
    """`all`, or set names and paths separated by commas. Raises EvalFileError."""
    chosen = available() if names.strip() == "all" else [n.strip() for n in names.split(",") if n.strip()]
    if not chosen:
        raise EvalFileError(f"name a public set ({', '.join(available())}), a converted file, or all")
    return [load_public(name) for name in chosen]


async def evaluate_sets(sets: list[PublicSet], which: str, k: int, sample: int | None) -> list[SetReport]:
    return [await evaluate_public(public, which, k, sample) for public in sets]
