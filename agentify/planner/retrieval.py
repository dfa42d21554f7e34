"""Retrieval over the tool catalog: BM25F over the tools' words, fused with a static embedding model.

Each tool is a document of weighted fields: the words of its name (snake, camel and kebab
case split), its description, its parameter names, their descriptions and the values they
choose among (`level`: "error", so "the console errors" meets it), and its backend's id and
description. Words are lower-cased, lightly stemmed (plurals, -ing, -ed, final e) and
stop words dropped, so "list the files" meets `list_directory`'s "files and directories".

`ToolIndex.search` is the hybrid ranking that `search_tools`, the model planner's shortlist and
the offline planner share: the lexical score (normalised by the query's best, and weighing more
the longer the query, whose exact words then carry it while its mean vector blurs) plus the cosine
of the query's and the tool's vectors (`embedding.py`; for a task of several sentences, the mean
of the whole task's cosine and its best sentence's), plus a bonus for the share of a tool's
name the query says, then plus a share of the best score among the tool's backend's tools, each
by a weight in `FITTED`. Those weights, and the weight of a name's
words against a description's, were fitted on the tuning parts of the public sets only
(scripts/fit_retrieval.py; agentify/eval/public.py). Without the model, the ranking is lexical.
Tool vectors are embedded once per text and kept (`embedding.remember`), also from a backend's
manifest, so a lazy backend's tools rank by meaning before it starts.

An index is cached by the catalog's content (`indexes.IndexCache`), so it is rebuilt exactly when
tools change.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import mcp_types as types

from agentify._common import vectors
from agentify.planner import embedding
from agentify.planner.catalog import Catalog, CatalogTool, enum_values
from agentify.planner.words import SYNONYMS, query_terms, sentences, word_pairs, words

if TYPE_CHECKING:
    from agentify.planner.embedding import Vectors


@dataclass(frozen=True)
class Weights:
    """How the hybrid score is made; see `FITTED`."""

    name: float
    """Lexical weight of a word of the tool's name (a description's word weighs 1)."""
    lexical: float
    """Weight of the lexical score divided by the query's best lexical score."""
    semantic: float
    """Weight of the cosine of the query's and the tool's vectors."""
    coverage: float
    """Weight of the share of the tool's name words that the query says."""
    whole_name: float = 0.0
    """Weight of the query saying every word of the tool's name ("run all tests": `run-test-all`), for names of at
    least `WHOLE_NAME_WORDS` words: saying "search" says all of a tool named `search`, and tells little."""
    backend: float = 0.0
    """Weight of the best score among the tool's backend's tools (its own included): tasks that need several tools
    mostly need them from one server, so a tool's siblings rise with it. It never changes the first tool."""
    provider: float = 0.0
    """A tool that finds an id one of the leading tools needs scores at least this share of that tool's score (so
    it follows it): "reviews of Titanic" needs `movie_reviews(movie_id)`, and so the backend's `search_movie`
    first (see `providers`)."""
    lexical_long: float = 0.0
    """Added to `lexical` in proportion to the query's length (its words, up to `LONG_QUERY` of them): a long,
    chatty request's mean vector blurs, while its exact words still pick the tool out."""


# Fitted by scripts/fit_retrieval.py: a grid search maximising the mean over the public sets of
# (recall@1 + recall@5) / 2 on their tuning parts only (agentify/eval/public.py), never on the
# check set. The grid's best (0.7171) has no whole-name bonus; with it, for names of two words or
# more (`WHOLE_NAME_WORDS`), the objective is the same and the project's own sets keep their first
# places. Rerun it after changing the index or the sets.
# How the lexical weight grows with the query's length (`lexical_long`) was fitted the same way
# (--adaptive), with toolbench's tuning part in the pool and the other weights as they were: 0.6965
# against 0.6946 for one weight, the least set's figure 0.607 against 0.598. A raise of 0.9 scored
# 0.6968, the same within a query, with a lower least set (0.605), so 0.6 was kept. A raise when the
# query names a backend scored 0.6987 but took first places from the project's own sets ("ls arbigent"
# means the folder), so it was left out; raises for the share of the query's words that few tools hold
# (0.6980) and for how far the best lexical score leads the next (0.6955) were not kept either.
# The backend's weight was refitted beside `search.OPEN_REQUESTS` (--requests), both filling the places after
# the first: 0.6 (with 0.05) scores 0.7028 against 0.6965 for 0.3 with the parts after the first three, the
# least set's figure the same (0.607); 0.7 scores the same, and the smaller change was kept.
FITTED = Weights(
    name=0.5,
    lexical=0.3,
    semantic=1.0,
    coverage=0.2,
    whole_name=0.1,
    backend=0.6,
    provider=0.97,
    lexical_long=0.6,
)
WHOLE_NAME_WORDS = 2
"""With one-word names too, the tuning parts' objective fell from 0.7171 to 0.7152."""
LONG_QUERY = 30
"""A query of this many words or more counts as fully long (`Weights.lexical_long`)."""
LEXICAL_ONLY = Weights(
    name=FITTED.name,
    lexical=1.0,
    semantic=0.0,
    coverage=FITTED.coverage,
    whole_name=FITTED.whole_name,
    backend=FITTED.backend,
    provider=FITTED.provider,
)

# Field weights. A name's word weighs `Weights.name` in the hybrid ranking (fitted), and RULES_NAME_WEIGHT in
# `rank`, the lexical ranking the offline planner's rules and margins were built on (examples/eval).
RULES_NAME_WEIGHT = 3.0
DESCRIPTION_WEIGHT = 1.0
PARAMETER_NAME_WEIGHT = 1.0
PARAMETER_DESCRIPTION_WEIGHT = 0.3
BACKEND_WEIGHT = 1.0
K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Ranked:
    tool: CatalogTool
    score: float


class ToolIndex:
    """BM25F over one catalog. Build it through `IndexCache.get` so it is shared while tools stay the same.

    Everything a task's ranking needs is computed here, once per catalog: the postings (for each
    word, the tools that hold it and its BM25 weight there), so ranking a task costs in proportion
    to the tools that share a word with it, not to the catalog's size; and the words of each tool's
    own name, which the offline planner and `search_tools` weigh by what the task says."""

    def __init__(self, catalog: Catalog, weights: Weights = FITTED) -> None:
        self.catalog = catalog
        self.weights = weights
        self._tools = list(catalog.tools.values())
        self._vectors: Vectors | None = None
        docs = [_document(tool, RULES_NAME_WEIGHT) for tool in self._tools]
        self._docs = {tool.name: doc for tool, doc in zip(self._tools, docs, strict=True)}
        self._position = {tool.name: i for i, tool in enumerate(self._tools)}
        self._postings = _postings(docs)
        self._hybrid = (
            self._postings
            if weights.name == RULES_NAME_WEIGHT
            else _postings([_document(tool, weights.name) for tool in self._tools])
        )
        self.name_words: dict[str, frozenset[str]] = {
            tool.name: frozenset(words(tool.tool.name)) - frozenset(words(tool.backend)) for tool in self._tools
        }
        """The words of each tool's own name, its backend's id left out, by catalog name."""
        self._name_sizes = [len(self.name_words[tool.name]) for tool in self._tools]
        self._in_names: defaultdict[str, list[int]] = defaultdict(list)
        """For each word, the tools (by position) whose own name has it: the name bonuses cost what the query's
        words find, not a pass over every tool that shares a word with it."""
        for i, tool in enumerate(self._tools):
            for word in self.name_words[tool.name]:
                self._in_names[word].append(i)
        self.deprecated = frozenset(t.name for t in self._tools if "deprecated" in (t.tool.description or "").lower())
        self.destructive = frozenset(
            t.name for t in self._tools if t.tool.annotations and t.tool.annotations.destructive_hint
        )
        self._backend_words = {
            backend: set(words(backend)) for backend in dict.fromkeys(t.backend for t in self._tools)
        }
        numbered = {backend: i for i, backend in enumerate(self._backend_words)}
        self._backend_of = [numbered[t.backend] for t in self._tools]
        """Each tool's backend by number (catalog order), for the backend weight."""
        self._providers = providers(self._tools, self.name_words)
        self._runs: tuple[Any, Any] | None = None
        self._last: tuple[str, Any] | None = None
        """The last text's cosines (`similarity`)."""

    def rank(self, terms: Mapping[str, float]) -> list[Ranked]:
        """Every tool for the weighted `terms` (see `query_terms`), best first; ties keep the catalog's order."""
        scores = self._lexical(terms)
        best = sorted(scores, key=lambda i: (-scores[i], i))
        return [Ranked(self._tools[i], scores[i]) for i in best] + [
            Ranked(tool, 0.0) for i, tool in enumerate(self._tools) if i not in scores
        ]

    @property
    def semantic(self) -> bool:
        """Whether `search` ranks by meaning too (the model is installed and weighted)."""
        return self.weights.semantic > 0 and embedding.embedder() is not None

    def search(
        self,
        text: str,
        terms: Mapping[str, float] | None = None,
        limit: int | None = None,
        said: frozenset[str] = frozenset(),
        *,
        related: bool = True,
    ) -> list[Ranked]:
        """The best `limit` tools (all by default) for `text`, best first, by the hybrid score (see the module's
        docstring); ties keep the catalog's order, and tools that score nothing come last with 0. `said`: words
        that count as said for the name bonuses though not in `terms` (a question says "list" and "read").
        `related=False` leaves out what tools gain from others (the backend and provider weights) and the lexical
        weight's growth with the query's length: each tool's score by itself, on one scale for every query, as the
        offline planner's confidence compares them with absolute thresholds (scores that grow with the query's
        length would make a long query look surer)."""
        terms = query_terms(text) if terms is None else terms
        w = self.weights if related else replace(self.weights, backend=0.0, provider=0.0, lexical_long=0.0)
        sparse = self._lexical(terms, self._hybrid)
        best = max(sparse.values(), default=0.0) or 1.0
        if w.semantic and w.lexical_long:
            w = replace(w, lexical=self.lexical_weight(terms))
        named = self._name_bonus(said | set(terms), sparse, w) if w.coverage or w.whole_name else {}
        scale = w.lexical / best
        similarity = self.similarity(text) if w.semantic else None
        count = len(self._tools) if limit is None else min(limit, len(self._tools))
        if similarity is None:
            for i in sparse:
                sparse[i] = sparse[i] * scale + named.get(i, 0.0)
            if w.backend:
                best_of: dict[str, float] = {}
                for i, value in sparse.items():
                    backend = self._tools[i].backend
                    best_of[backend] = max(best_of.get(backend, 0.0), value)
                for i in sparse:
                    sparse[i] += w.backend * best_of[self._tools[i].backend]
            if w.provider and self._providers:
                leading = sorted(sparse, key=lambda i: -sparse[i])[:LEADING]
                for j, value in self._fed(leading, sparse.__getitem__).items():
                    sparse[j] = max(sparse.get(j, 0.0), w.provider * value)
            order = sorted(sparse, key=lambda i: (-sparse[i], i))[:count]
            rest = (i for i in range(len(self._tools)) if i not in sparse)
            chosen = [(i, sparse[i]) for i in order] + [(i, 0.0) for i in rest][: count - len(order)]
            return [Ranked(self._tools[i], score) for i, score in chosen]
        import numpy as np

        scores = np.maximum(similarity, 0.0) * w.semantic
        if sparse:
            found = np.fromiter(sparse, dtype=np.intp, count=len(sparse))
            scores[found] += np.fromiter(sparse.values(), dtype=np.float64, count=len(sparse)) * scale
        for i, value in named.items():
            scores[i] += value
        if w.backend:
            order, starts = self._backend_runs(np)
            of_backend = np.maximum.reduceat(scores[order], starts)  # each backend's best, in `_backend_of`'s numbers
            scores = scores + w.backend * of_backend[self._backend_of]
        if w.provider and self._providers:
            leading = np.argpartition(-scores, min(LEADING, len(scores) - 1))[:LEADING].tolist()
            for j, value in self._fed(leading, lambda i: float(scores[i])).items():
                scores[j] = max(scores[j], w.provider * value)
        if count < len(scores):
            picked: list[int] = np.argpartition(-scores, count - 1)[:count].tolist() if count else []
        else:
            picked = list(range(len(scores)))
        values = {i: float(scores[i]) for i in picked}
        picked.sort(key=lambda i: (-values[i], i))  # ties keep the catalog's order
        return [Ranked(self._tools[i], values[i]) for i in picked]

    def _name_bonus(self, said: Set[str], sparse: Mapping[int, float], w: Weights) -> dict[int, float]:
        """The name bonuses (`Weights.coverage`, `Weights.whole_name`) of the tools in `sparse` whose names `said`
        has words of."""
        hits: dict[int, int] = {}
        for word in said:
            for i in self._in_names.get(word, ()):
                if i in sparse:
                    hits[i] = hits.get(i, 0) + 1
        bonus = {}
        for i, found in hits.items():
            size = self._name_sizes[i]
            whole = w.whole_name if found == size and size >= WHOLE_NAME_WORDS else 0.0
            bonus[i] = w.coverage * found / size + whole
        return bonus

    def _backend_runs(self, np: Any) -> tuple[Any, Any]:
        """The tools' positions ordered by backend number, and where each backend's run starts in that order."""
        if self._runs is None:
            backend_of = np.asarray(self._backend_of, dtype=np.intp)
            order = np.argsort(backend_of, kind="stable")
            starts = np.searchsorted(backend_of[order], np.arange(len(self._backend_words)))
            self._runs = (order, starts)
        return self._runs

    def lexical_weight(self, terms: Mapping[str, float]) -> float:
        """The lexical score's weight for a query of these `terms`: `Weights.lexical`, raised for a long one."""
        said = sum(1 for weight in terms.values() if weight >= 1)
        return self.weights.lexical + self.weights.lexical_long * min(said, LONG_QUERY) / LONG_QUERY

    def _fed(self, leading: list[int], score: Any) -> dict[int, float]:
        """For each tool that finds an id one of the `leading` tools needs, the best such tool's score."""
        fed: dict[int, float] = {}
        for i in leading:
            for j in self._providers.get(i, ()):
                fed[j] = max(fed.get(j, 0.0), score(i))
        return fed

    def _lexical(self, terms: Mapping[str, float], postings: Postings | None = None) -> dict[int, float]:
        scores: dict[int, float] = {}
        for term, weight in terms.items():
            for i, score in (self._postings if postings is None else postings).get(term, ()):
                scores[i] = scores.get(i, 0.0) + weight * score
        return scores

    def similarity(self, text: str) -> Any:
        """The cosine of `text`'s vector with each tool's (catalog order), or None without the model."""
        model = embedding.embedder()
        if model is None or not self._tools:
            return None
        if self._vectors is None:
            self._vectors = embedding.vectors(model, [embedding_text(t) for t in self._tools])
        import numpy as np

        last = self._last
        if last is not None and last[0] == text:
            return last[1]  # the planner ranks one task twice, then weighs its best tool
        pieces = sentences(text)
        queries = model.embed([text, *pieces] if len(pieces) > 1 else [text])
        # einsum, not `@`: a matrix-vector product through BLAS spreads over threads, which costs tens of
        # milliseconds on a busy machine for what one core does in one.
        cosines = np.einsum("ij,j->i", self._vectors, queries[0])
        if len(queries) > 1:
            cosines = (cosines + np.max(np.einsum("ij,kj->ki", self._vectors, queries[1:]), axis=0)) / 2
        cosines.setflags(write=False)
        self._last = (text, cosines)
        return cosines

    def meaning(self, text: str, tools: list[CatalogTool]) -> tuple[list[float], float] | None:
        """The cosines of `text` with `tools`, and how far the catalog's best cosine stands above its second best;
        None without the model."""
        similarity = self.similarity(text)
        if similarity is None:
            return None
        import numpy as np

        if len(similarity) > 1:
            top = np.partition(similarity, -2)[-2:]
            gap = float(top.max() - top.min())
        else:
            gap = float(similarity[0])  # a lone tool stands above nothing, as `cosine_lead` counts it
        return [float(similarity[self._position[t.name]]) for t in tools], gap

    def lexical_best(self, terms: Mapping[str, float]) -> CatalogTool | None:
        """The tool with the best lexical score in the hybrid ranking's fields (names at `Weights.name`)."""
        scores = self._lexical(terms, self._hybrid)
        return self._tools[min(scores, key=lambda i: (-scores[i], i))] if scores else None

    def matched(self, tool: CatalogTool, text: str) -> tuple[list[str], list[str]]:
        """(the words of `text` that `tool`'s document holds, themselves or by a synonym; all its words)."""
        doc = self._docs[tool.name]
        said = dict(word_pairs(text))
        found = [w for w, s in said.items() if s in doc or any(syn in doc for syn in SYNONYMS.get(s, ()))]
        return found, list(said)

    def named_backends(self, text: str) -> set[str]:
        """Backends whose id `text` names as words ("run the arbigent tests" names `arbigent`)."""
        present = set(words(text))
        return {b for b, ws in self._backend_words.items() if ws and ws <= present}


Postings = dict[str, list[tuple[int, float]]]


LEADING = 5
"""How many of the best tools have the tools that find their ids raised (`Weights.provider`)."""
FINDING = frozenset(words("search find lookup query"))
"""A tool whose name has one of these words and an entity's finds that entity's id."""


def providers(tools: list[CatalogTool], name_words: Mapping[str, frozenset[str]]) -> dict[int, tuple[int, ...]]:
    """For each tool (by position) that requires an `<entity>_id` argument, the tools of its backend that find that
    entity: their names say a finding word and the entity ("movie_id": `search_movie`), and they need no such id."""
    by_backend: defaultdict[str, list[int]] = defaultdict(list)
    for i, tool in enumerate(tools):
        by_backend[tool.backend].append(i)
    out: dict[int, tuple[int, ...]] = {}
    for i, tool in enumerate(tools):
        needed = [words(str(p)) for p in tool.input_schema.get("required") or []]
        entities = [frozenset(ws[:-1]) for ws in needed if len(ws) > 1 and ws[-1] == "id"]
        found = [
            j
            for j in by_backend[tool.backend]
            for entity in entities
            if j != i and FINDING & name_words[tools[j].name] and entity <= name_words[tools[j].name]
        ]
        if found:
            out[i] = tuple(dict.fromkeys(found))
    return out


def _postings(docs: list[dict[str, float]]) -> Postings:
    """For each word, the tools (by position) that hold it and its BM25 weight there."""
    count = len(docs) or 1
    lengths = [sum(doc.values()) for doc in docs]
    mean_length = sum(lengths) / count or 1.0
    found: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
    for i, doc in enumerate(docs):
        norm = K1 * (1 - B + B * lengths[i] / mean_length)
        for term, tf in doc.items():
            found[term].append((i, tf * (K1 + 1) / (tf + norm)))
    return {term: [(i, _idf(count, len(hits)) * weight) for i, weight in hits] for term, hits in found.items()}


def _idf(count: int, found: int) -> float:
    return math.log(1 + (count - found + 0.5) / (found + 0.5))


def embedding_text(tool: CatalogTool) -> str:
    """What a tool's vector is made of: its name's words, its description and its backend's."""
    return text_to_embed(tool.tool, tool.backend_description)


def text_to_embed(tool: types.Tool, backend_description: str) -> str:
    name = " ".join(w for w, _ in word_pairs(tool.name))
    described = tool.description or tool.title or ""
    return f"{name}: {described} ({backend_description})" if backend_description else f"{name}: {described}"


def _document(tool: CatalogTool, name_weight: float) -> dict[str, float]:
    terms: defaultdict[str, float] = defaultdict(float)

    def add(text: str | None, weight: float) -> None:
        for word in words(text or ""):
            terms[word] += weight

    add(tool.tool.name, name_weight)
    add(tool.tool.title, DESCRIPTION_WEIGHT)
    add(tool.tool.description, DESCRIPTION_WEIGHT)
    for name, spec in (tool.input_schema.get("properties") or {}).items():
        add(name, PARAMETER_NAME_WEIGHT)
        if isinstance(spec, dict):
            add(str(spec.get("description") or ""), PARAMETER_DESCRIPTION_WEIGHT)
            items = spec.get("items")
            values = enum_values(spec) + (enum_values(items) if isinstance(items, dict) else [])
            add(" ".join(map(str, values)), PARAMETER_DESCRIPTION_WEIGHT)
    add(tool.backend, BACKEND_WEIGHT)
    add(tool.backend_description, BACKEND_WEIGHT)
    return dict(terms)


def _keep(backend_description: str, tools: list[types.Tool]) -> dict[str, str]:
    return embedding.encode(embedding.known([text_to_embed(tool, backend_description) for tool in tools]))


def _restore(data: Any) -> None:
    embedding.remember(embedding.decode(data))


vectors.register(_keep, _restore)  # a manifest keeps its tools' vectors (see `_common.vectors`)
