"""The hybrid index: ranking by meaning with the packaged model, the lexical fallback without it, the
offline planner's confident answers and its refusals with candidates, the growing shortlist, and
queries that need several tools, and what a tool gains from its backend's best."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agentify.errors import NoPlan
from agentify.mcp_server.results import error_result
from agentify.planner import embedding
from agentify.planner.catalog import Catalog
from agentify.planner.offline import OfflinePlanner
from agentify.planner.retrieval import FITTED, ToolIndex
from agentify.planner.search import parts, search_tools
from agentify.planner.shortlist import shortlist
from agentify.security.redact import Redactor
from tests.conftest import AGENTIFY, REPO
from tests.planner.support import catalog_of, example_catalog, task, tool

pytestmark = pytest.mark.skipif(embedding.embedder() is None, reason=f"needs the model: {embedding.status()}")

TRAVEL = catalog_of(
    tool("get_forecast", "Weather forecast for a city: temperature, rain and wind for the next days"),
    tool("convert_currency", "Convert an amount of money from one currency to another"),
    tool("translate_text", "Translate a text into another language"),
    tool("book_hotel", "Reserve a room in a hotel"),
    backend="travel",
)
LOOKALIKES = catalog_of(
    *(tool(f"report_{i}", f"Export the sales report of region {i} as a spreadsheet") for i in range(30)),
    tool("send_email", "Send an email message"),
    backend="crm",
)

LISTING = """
import json, sys
from agentify.planner import embedding
from agentify.planner.retrieval import ToolIndex
from agentify.planner.search import search_tools
from tests.planner.support import example_catalog
index = ToolIndex(example_catalog())
found = [r.tool.name for r in search_tools(index, sys.argv[1], 3)]
print(json.dumps({"status": embedding.status(), "semantic": index.semantic, "found": found}))
"""


def run_without_the_model(query: str, tmp_path: Path) -> dict[str, object]:
    """In a fresh interpreter whose `wordllama` is a package without the model's files (a broken install)."""
    shadow = tmp_path / "shadow" / "wordllama"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not the real package')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIFY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), str(REPO)])
    done = subprocess.run(
        [sys.executable, "-c", LISTING, query], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_a_tool_is_found_by_what_it_does_when_the_words_differ() -> None:
    index = ToolIndex(TRAVEL)
    assert index.semantic
    found = [r.tool.tool.name for r in search_tools(index, "will it be sunny in Rome on Sunday?", 2)]
    assert found[0] == "get_forecast"


def test_without_the_model_search_ranks_by_words_and_says_so(tmp_path: Path) -> None:
    answer = run_without_the_model("list the files in the directory", tmp_path)
    assert answer["semantic"] is False
    assert str(answer["status"]).startswith("lexical only: the wordllama model cannot be read")
    assert answer["found"] and answer["found"][0] == "filesystem__list_directory"  # type: ignore[index]


def test_doctor_says_when_search_is_lexical_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTIFY_", "OPENAI_"))}
    env |= {"AGENTIFY_EMBEDDINGS": "off", "AGENTIFY_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    config = tmp_path / "agentify.json"
    config.write_text('{"backends": []}')
    done = subprocess.run(
        [str(AGENTIFY), "doctor", "--config", str(config)], env=env, capture_output=True, text=True, timeout=60
    )
    assert "tool search: lexical only: AGENTIFY_EMBEDDINGS=off" in done.stdout, done.stdout + done.stderr


@pytest.mark.anyio
async def test_the_offline_planner_answers_when_one_tool_stands_out() -> None:
    plan = await OfflinePlanner().plan(
        task("do I need an umbrella in Oslo tomorrow, what does the forecast say", cwd=None), TRAVEL
    )
    assert (plan.backend, plan.tool) == ("travel", "get_forecast")
    assert "hybrid ranking puts it first" in plan.reasoning and "likely right" in plan.reasoning


PLANNING = """
import asyncio, json, sys
from agentify.errors import NoPlan
from agentify.planner.offline import OfflinePlanner
from tests.planner.support import task
from tests.planner.test_hybrid import TRAVEL
try:
    plan = asyncio.run(OfflinePlanner().plan(task(sys.argv[1], cwd=None), TRAVEL))
    print(json.dumps({"tool": plan.tool, "reasoning": plan.reasoning}))
except NoPlan as refusal:
    print(json.dumps({"refused": refusal.message, "candidates": [c["tool"] for c in refusal.candidates]}))
"""


def test_without_the_model_the_planner_answers_by_its_rules_alone() -> None:
    query = "will there be rain and wind in Oslo tomorrow"  # "forecast" is not said: the rules refuse
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIFY_")}
    answers = []
    for switch in ("on", "off"):
        done = subprocess.run(
            [sys.executable, "-c", PLANNING, query],
            env={**env, "AGENTIFY_EMBEDDINGS": switch, "PYTHONPATH": str(REPO)},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout))
    with_model, without = answers
    assert with_model["tool"] == "get_forecast" and "likely right" in with_model["reasoning"]
    assert "get_forecast" in without["refused"] and without["candidates"][0] == "get_forecast"


@pytest.mark.anyio
async def test_the_same_tool_on_two_backends_is_a_refusal_naming_both() -> None:
    forecast = tool("get_forecast", "Weather forecast for a city: temperature, rain and wind for the next days")
    twice = Catalog(
        [*catalog_of(forecast, backend="north").tools.values(), *catalog_of(forecast, backend="south").tools.values()]
    )
    with pytest.raises(NoPlan) as caught:
        await OfflinePlanner().plan(task("will there be rain and wind in Oslo tomorrow", cwd=None), twice)
    assert {c["backend"] for c in caught.value.candidates[:2]} == {"north", "south"}
    assert (
        await OfflinePlanner().plan(task("will there be rain and wind in Oslo tomorrow", cwd=None), TRAVEL)
    ).tool == ("get_forecast")


@pytest.mark.anyio
async def test_a_short_task_must_name_the_tool_even_when_its_name_is_its_backends() -> None:
    weather = catalog_of(tool("weather", "Weather forecast for a city"), backend="weather")
    catalog = Catalog([*weather.tools.values(), *TRAVEL.tools.values()])
    with pytest.raises(NoPlan):  # one word of two matches, and the tool has no name words of its own to say
        await OfflinePlanner().plan(task("sunny city", cwd=None), catalog)


def test_the_planners_confidence_grows_with_the_evidence_and_a_tie_is_never_taken() -> None:
    from agentify.planner.offline import confidence
    from agentify.planner.words import query_terms

    index = ToolIndex(TRAVEL)
    query = "do I need an umbrella in Oslo tomorrow, what does the forecast say"
    terms = query_terms(query)
    evidence = confidence.weigh(index, query, terms, index.search(query, terms, 3, related=False))
    assert evidence is not None and evidence.cosine > 0 and evidence.lead > 0 and evidence.lexical_first == 1
    clear = confidence.probability(evidence)
    tie = confidence.probability(replace(evidence, lead=0.0, lead_third=0.0, cosine_lead=0.0, meaning_gap=0.0))
    assert tie < confidence.THRESHOLD <= clear
    assert confidence.probability(replace(evidence, lexical_first=0.0)) < clear
    assert confidence.weigh(index, query, terms, []) is None


@pytest.mark.anyio
async def test_the_offline_planner_refuses_look_alikes_with_its_best_three_candidates() -> None:
    with pytest.raises(NoPlan) as caught:
        await OfflinePlanner().plan(task("export the regional sales report", cwd=None), LOOKALIKES)
    refusal = caught.value
    assert refusal.code == "no_plan" and len(refusal.candidates) == 3
    assert all(c["backend"] == "crm" and c["tool"].startswith("report_") for c in refusal.candidates)
    assert "Closest tools: crm.report_" in refusal.message
    result = error_result(refusal, Redactor())
    meta = (result.meta or {})["agentify/error"]
    assert result.is_error and meta["code"] == "no_plan"
    assert [c["name"] for c in meta["candidates"]] == [c["name"] for c in refusal.candidates]
    assert meta["candidates"][0]["description"].startswith("Export the sales report")


def test_the_shortlist_grows_over_tools_that_score_alike_and_not_over_distinct_ones() -> None:
    alike = shortlist(ToolIndex(LOOKALIKES), task("export the sales report", cwd=None), 5)
    distinct = shortlist(ToolIndex(example_catalog(generated=True)), task("take a screenshot of the page"), 5)
    assert len(alike) > 5 and all(t.tool.name.startswith("report_") for t in alike)
    assert len(distinct) < 10


def test_a_query_for_several_tools_gets_each_of_them() -> None:
    index = ToolIndex(example_catalog(generated=True))
    query = "read the file notes.txt and then take a screenshot of the page"
    assert parts(query) == ["read the file notes.txt", "take a screenshot of the page"]
    found = [r.tool.name for r in search_tools(index, query, 5)]
    assert "browser__browser_take_screenshot" in found
    assert {"filesystem__read_text_file", "filesystem__read_file"} & set(found)
    assert parts("search and replace in a file") == []  # one request: "search" is not a request of its own


def test_each_tool_gains_a_share_of_the_best_score_among_its_backends_tools() -> None:
    catalog = example_catalog(generated=True)
    query = "take a screenshot of the page and list the open pull requests"
    plain = ToolIndex(catalog, replace(FITTED, backend=0.0, provider=0.0)).search(query)
    raised = {
        r.tool.name: r.score for r in ToolIndex(catalog, replace(FITTED, backend=0.5, provider=0.0)).search(query)
    }
    best: dict[str, float] = {}
    for r in plain:
        best[r.tool.backend] = max(best.get(r.tool.backend, 0.0), r.score)
    assert len(best) > 10 and len({round(v, 3) for v in best.values()}) > 10
    assert all(raised[r.tool.name] == pytest.approx(r.score + 0.5 * best[r.tool.backend], abs=1e-4) for r in plain)


def test_a_manifest_keeps_the_vectors_of_its_tools(tmp_path: Path) -> None:
    from agentify.backends.manifest import ManifestStore
    from agentify.config import BackendConfig
    from agentify.planner.retrieval import text_to_embed

    spec = BackendConfig.model_validate({"id": "travel", "command": "x", "description": "trips"})
    tools = [t.tool for t in TRAVEL.tools.values()]
    ManifestStore(tmp_path).save(spec, tools)
    saved = json.loads(next((tmp_path / "manifests").iterdir()).read_text())
    vectors = embedding.decode(saved["vectors"])
    texts = [text_to_embed(t, "trips") for t in tools]
    assert sorted(vectors) == sorted(embedding.digest(t) for t in texts)
    model = embedding.embedder()
    assert model is not None
    fresh = model.embed(texts[:1])[0]
    import numpy as np

    kept = np.frombuffer(vectors[embedding.digest(texts[0])], dtype=np.float16).astype(np.float32)
    assert float(kept @ fresh) > 0.99
    assert [t.name for t in ManifestStore(tmp_path).load(spec) or []] == [t.name for t in tools]


def test_unusable_vectors_in_a_manifest_are_left_out() -> None:
    assert embedding.decode({"a": "not base64!", "b": "AAAA"}) == {"b": b"\x00\x00\x00"}
    assert embedding.decode(["not", "a", "map"]) == {}
