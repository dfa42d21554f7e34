"""Convert public tool-retrieval benchmarks into the compact sets `agentify eval --public` reads.

Each source is a git checkout (a clone or a bare mirror) read with `git show` at its commit, so
the output says exactly which data it came from. Written to agentify/eval/data/public/NAME.json:

    {"name", "source": {"repo", "commit", "licence", "paper", "files"},
     "backends": [{"id", "description", "tools": [<MCP Tool>]}],
     "queries": [{"query": str, "tools": ["<backend>/<tool>", ...]}]}

Sets (all three licences allow redistribution with attribution; see the README beside the data):
- metatool: HowieHwong/MetaTool (MIT). 199 ChatGPT-plugin tools, one service each; its single-tool
  queries (20,614, sampled to `METATOOL_PER_TOOL` per tool) and all 497 multi-tool queries.
- toolalpaca: tangqiaoyu/ToolAlpaca (Apache-2.0). The 21 real and simulated evaluation APIs'
  functions; each instruction is labelled with the functions of its golden actions.
- restbench: Yifan-Song793/RestGPT (MIT). The TMDB and Spotify endpoints (OpenAPI), each query
  labelled with the endpoints of its solution path (mostly several).
- toolbench: THUNLP-MT/StableToolBench (Apache-2.0), the solvable test queries of ToolBench
  (RapidAPI services). Every API that any test query offers becomes a tool of its service's
  backend, and each query is labelled with its "relevant APIs" (mostly several).
- bfcl-live (a check set: held out whole, nothing is fitted on it): ShishirPatil/gorilla
  (Apache-2.0), the Berkeley Function-Calling Leaderboard's "live" simple and multiple categories:
  functions that users contributed, each query labelled with the one function its answer calls
  and, where the tool kept under that name takes the same arguments, the values its possible
  answer accepts for each of them.
  Every function offered to any of those queries is a tool (once per name), on a backend per group
  of functions offered together where it first appears.

Sampling is deterministic (a hash of the query's text), so a rerun gives the same file.

    python scripts/convert_public_sets.py --metatool DIR --toolalpaca DIR --restbench DIR --toolbench DIR --bfcl DIR
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "agentify" / "eval" / "data" / "public"
METATOOL_PER_TOOL = 8
MAX_DESCRIPTION = 600


def git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def head(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "x"


def tool_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_")[:60] or "tool"


def key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3] + "..."


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def metatool(repo: Path) -> dict[str, Any]:
    described: dict[str, str] = json.loads(git_show(repo, "dataset/plugin_des.json"))
    rows = list(csv.DictReader(io.StringIO(git_show(repo, "dataset/data/all_clean_data.csv"))))
    multi = json.loads(git_show(repo, "dataset/data/multi_tool_query_golden.json"))
    backends = [
        {
            "id": slug(name),
            "description": "",
            "tools": [{"name": name, "description": clip(text), "inputSchema": schema({}, [])}],
        }
        for name, text in sorted(described.items())
    ]
    by_tool: dict[str, list[str]] = {}
    for row in rows:
        by_tool.setdefault(row["Tool"], []).append(row["Query"])
    queries = []
    for name in sorted(by_tool):
        chosen = sorted(set(by_tool[name]), key=key)[:METATOOL_PER_TOOL]
        queries += [{"query": q, "tools": [f"{slug(name)}/{name}"]} for q in chosen]
    queries += [{"query": m["query"], "tools": [f"{slug(t)}/{t}" for t in m["tool"]]} for m in multi]
    return {
        "name": "metatool",
        "source": {
            "repo": "HowieHwong/MetaTool",
            "commit": head(repo),
            "licence": "MIT (Copyright (c) 2023 Yue Huang)",
            "paper": "Huang et al., MetaTool Benchmark for Large Language Models, ICLR 2024 (arXiv:2310.03128)",
            "files": [
                "dataset/plugin_des.json",
                "dataset/data/all_clean_data.csv",
                "dataset/data/multi_tool_query_golden.json",
            ],
            "sampling": f"single-tool queries: the first {METATOOL_PER_TOOL} of each tool by sha256 of the text",
        },
        "backends": backends,
        "queries": queries,
    }


_PARAMETERS = re.compile(r"Parameters:\s*(\{.*?\})\s*\n\s*Output:", re.S)


def _alpaca_tool(name: str, text: str) -> dict[str, Any]:
    summary = text.split("\nParameters:")[0]
    properties: dict[str, Any] = {}
    found = _PARAMETERS.search(text)
    if found:
        try:
            parameters = json.loads(found.group(1))
        except json.JSONDecodeError:
            parameters = {}
        for pname, ptext in parameters.items():
            text_ = str(ptext)
            required = text_.startswith("Required.")
            kind, _, rest = text_.removeprefix("Required.").strip().partition(". ")
            kind = kind.strip().lower()
            properties[pname] = {
                "type": kind if kind in ("string", "integer", "number", "boolean", "array", "object") else "string",
                "description": clip(rest),
                **({"x-required": True} if required else {}),
            }
    required = [p for p, spec in properties.items() if spec.pop("x-required", False)]
    return {"name": tool_name(name), "description": clip(summary), "inputSchema": schema(properties, required)}


def toolalpaca(repo: Path) -> dict[str, Any]:
    backends, queries, seen = [], [], set()
    for part in ("data/eval_real.json", "data/eval_simulated.json"):
        for api in json.loads(git_show(repo, part)):
            bid = slug(api["Name"])
            if bid in seen:
                continue
            seen.add(bid)
            functions = {n: t for n, t in api["Function_Description"].items() if n != "components" and t}
            backends.append(
                {
                    "id": bid,
                    "description": clip(api.get("Description") or ""),
                    "tools": [_alpaca_tool(n, t) for n, t in functions.items()],
                }
            )
            for instruction, golden in zip(api["Instructions"], api["Golden_Answers"], strict=False):
                names = list(dict.fromkeys(step["Action"] for step in golden if step.get("Action") in functions))
                if names:
                    queries.append({"query": instruction, "tools": [f"{bid}/{tool_name(n)}" for n in names]})
    return {
        "name": "toolalpaca",
        "source": {
            "repo": "tangqiaoyu/ToolAlpaca",
            "commit": head(repo),
            "licence": "Apache-2.0",
            "paper": "Tang et al., ToolAlpaca: Generalized Tool Learning for Language Models with 3000 Simulated "
            "Cases (arXiv:2306.05301)",
            "files": ["data/eval_real.json", "data/eval_simulated.json"],
            "sampling": "none: every evaluation API, function and instruction with a golden action",
        },
        "backends": backends,
        "queries": queries,
    }


def _resolve(spec: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def _rest_name(method: str, path: str) -> str:
    return tool_name(f"{method}_{path.strip('/').replace('{', '').replace('}', '')}".replace("/", "_"))


def restbench(repo: Path) -> dict[str, Any]:
    backends, queries = [], []
    for service in ("tmdb", "spotify"):
        spec = json.loads(git_show(repo, f"specs/{service}_oas.json"))
        tools, names = [], {}
        for path, item in spec["paths"].items():
            shared = item.get("parameters", [])
            for method, op in item.items():
                if method not in ("get", "post", "put", "delete", "patch"):
                    continue
                properties, required = {}, []
                for raw in [*shared, *op.get("parameters", [])]:
                    p = _resolve(spec, raw)
                    properties[p["name"]] = {
                        "type": _resolve(spec, p.get("schema", {})).get("type", "string"),
                        "description": clip(p.get("description") or ""),
                    }
                    if p.get("required"):
                        required.append(p["name"])
                text = " ".join(x.strip() for x in (op.get("summary") or "", op.get("description") or "") if x.strip())
                name = _rest_name(method, path)
                names[f"{method.upper()} {path}"] = name
                tools.append({"name": name, "description": clip(text), "inputSchema": schema(properties, required)})
        title = spec.get("info", {}).get("title", service)
        backends.append({"id": service, "description": clip(title), "tools": tools})
        for item in json.loads(git_show(repo, f"datasets/{service}.json")):
            wanted = [names[s] for s in dict.fromkeys(item["solution"]) if s in names]
            if wanted:
                queries.append({"query": item["query"], "tools": [f"{service}/{n}" for n in wanted]})
    return {
        "name": "restbench",
        "source": {
            "repo": "Yifan-Song793/RestGPT",
            "commit": head(repo),
            "licence": "MIT (Copyright (c) 2023 Yifan Song)",
            "paper": "Song et al., RestGPT: Connecting Large Language Models with Real-World RESTful APIs "
            "(arXiv:2306.06624)",
            "files": ["specs/tmdb_oas.json", "specs/spotify_oas.json", "datasets/tmdb.json", "datasets/spotify.json"],
            "sampling": "none: every query whose solution names a listed endpoint",
        },
        "backends": backends,
        "queries": queries,
    }


TOOLBENCH_GROUPS = ("G1_instruction", "G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction")
MAX_PARAMETER_DESCRIPTION = 200


def _toolbench_tool(api: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for kind in ("required_parameters", "optional_parameters"):
        for p in api.get(kind) or []:
            name = tool_name(str(p.get("name") or ""))
            kind_ = str(p.get("type") or "string").lower()
            text = " ".join(str(p.get("description") or "").split())[:MAX_PARAMETER_DESCRIPTION]
            properties[name] = {
                "type": {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(kind_, "string")
                if kind_ not in ("string", "integer", "number", "boolean", "array", "object")
                else kind_,
                **({"description": text} if text else {}),
            }
            if kind == "required_parameters":
                required.append(name)
    return {
        "name": tool_name(api["api_name"]),
        "description": clip(str(api.get("api_description") or "")),
        "inputSchema": schema(properties, required),
    }


def toolbench(repo: Path) -> dict[str, Any]:
    apis: dict[tuple[str, str], dict[str, Any]] = {}
    queries = []
    for group in TOOLBENCH_GROUPS:
        for item in json.loads(git_show(repo, f"solvable_queries/test_instruction/{group}.json")):
            for api in item["api_list"]:
                apis.setdefault((api["tool_name"], api["api_name"]), api)
            wanted = [f"{slug(t)}/{tool_name(a)}" for t, a in item["relevant APIs"] if (t, a) in apis]
            if wanted:
                queries.append({"query": item["query"], "tools": list(dict.fromkeys(wanted))})
    services: dict[str, dict[str, Any]] = {}
    for (service, _), api in sorted(apis.items()):
        backend = services.setdefault(
            slug(service), {"id": slug(service), "description": str(api.get("category_name") or ""), "tools": {}}
        )
        tool = _toolbench_tool(api)
        backend["tools"].setdefault(tool["name"], tool)
    backends = [{**b, "tools": list(b["tools"].values())} for b in services.values()]
    unique = list({q["query"]: q for q in queries}.values())
    return {
        "name": "toolbench",
        "source": {
            "repo": "THUNLP-MT/StableToolBench",
            "commit": head(repo),
            "licence": "Apache-2.0",
            "paper": "Qin et al., ToolLLM: Facilitating Large Language Models to Master 16000+ Real-world APIs, ICLR "
            "2024 (arXiv:2307.16789); Guo et al., StableToolBench (arXiv:2403.07714)",
            "files": [f"solvable_queries/test_instruction/{g}.json" for g in TOOLBENCH_GROUPS],
            "sampling": "none: every solvable test query; a backend's description is its RapidAPI category",
        },
        "backends": backends,
        "queries": unique,
    }


BFCL_DATA = "berkeley-function-call-leaderboard/bfcl_eval/data"
BFCL_CATEGORIES = ("live_simple", "live_multiple")
_BFCL_ID = re.compile(r"^live_[a-z]+_\d+-(\d+)-\d+$")


def _bfcl_tool(function: dict[str, Any]) -> dict[str, Any]:
    parameters = function.get("parameters") or {}
    properties = {
        tool_name(name): {
            "type": spec.get("type")
            if spec.get("type") in ("string", "integer", "number", "boolean", "array")
            else "string",
            **({"description": clip(str(spec["description"]))} if spec.get("description") else {}),
            **({"enum": [str(v) for v in spec["enum"]]} if isinstance(spec.get("enum"), list) else {}),
        }
        for name, spec in (parameters.get("properties") or {}).items()
        if isinstance(spec, dict)
    }
    required = [tool_name(r) for r in parameters.get("required") or [] if tool_name(r) in properties]
    return {
        "name": tool_name(function["name"]),
        "description": clip(str(function.get("description") or "")),
        "inputSchema": schema(properties, required),
    }


def bfcl(repo: Path) -> dict[str, Any]:
    backends: dict[str, dict[str, Any]] = {}
    home: dict[str, str] = {}  # a function's name: the backend it was first offered on
    kept: dict[str, dict[str, Any]] = {}  # a function's name: the tool it became, as first offered
    queries = []
    files = []
    for category in BFCL_CATEGORIES:
        questions = f"{BFCL_DATA}/BFCL_v4_{category}.json"
        answers = f"{BFCL_DATA}/possible_answer/BFCL_v4_{category}.json"
        files += [questions, answers]
        truth = {a["id"]: a["ground_truth"] for a in map(json.loads, git_show(repo, answers).splitlines()) if a}
        for item in (json.loads(line) for line in git_show(repo, questions).splitlines() if line.strip()):
            found = _BFCL_ID.match(item["id"])
            group = f"{category.removeprefix('live_')}-{found.group(1) if found else item['id']}"
            for function in item["function"]:
                if function["name"] not in home:
                    home[function["name"]] = group
                    backend = backends.setdefault(group, {"id": group, "description": "", "tools": []})
                    kept[function["name"]] = _bfcl_tool(function)
                    backend["tools"].append(kept[function["name"]])
            calls = truth.get(item["id"], [])
            called = [name for call in calls for name in call]
            text = " ".join(m["content"] for m in item["question"][0] if m.get("role") == "user").strip()
            if text and len(called) == 1 and called[0] in home:
                query: dict[str, Any] = {"query": text, "tools": [f"{home[called[0]]}/{tool_name(called[0])}"]}
                # BFCL's possible answer: each argument's accepted values ("" where it may be left out), where the
                # tool kept under that name takes exactly those arguments (another group may offer other ones)
                arguments = {tool_name(name): values for name, values in calls[0][called[0]].items()}
                if set(arguments) == set(kept[called[0]]["inputSchema"]["properties"]):
                    query["arguments"] = arguments
                queries.append(query)
    unique = list({q["query"]: q for q in queries}.values())
    return {
        "name": "bfcl-live",
        "check": True,
        "source": {
            "repo": "ShishirPatil/gorilla",
            "commit": head(repo),
            "licence": "Apache-2.0",
            "paper": "Patil et al., The Berkeley Function Calling Leaderboard (BFCL): From Tool Use to Agentic "
            "Evaluation of Large Language Models, ICML 2025; Patil et al., Gorilla (arXiv:2305.15334)",
            "files": files,
            "sampling": "none: every live simple and multiple query whose answer calls one function; a function "
            "offered under one name in several groups is kept once, as first offered",
            "arguments": 'each query\'s possible answer: for every argument, the values BFCL accepts ("" where it '
            "may be left out), where the tool kept under that name takes exactly the answer's arguments",
        },
        "backends": list(backends.values()),
        "queries": unique,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metatool", type=Path, help="a checkout of HowieHwong/MetaTool")
    parser.add_argument("--toolalpaca", type=Path, help="a checkout of tangqiaoyu/ToolAlpaca")
    parser.add_argument("--restbench", type=Path, help="a checkout of Yifan-Song793/RestGPT")
    parser.add_argument("--toolbench", type=Path, help="a checkout of THUNLP-MT/StableToolBench")
    parser.add_argument("--bfcl", type=Path, help="a checkout of ShishirPatil/gorilla")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, convert in (
        ("metatool", metatool),
        ("toolalpaca", toolalpaca),
        ("restbench", restbench),
        ("toolbench", toolbench),
        ("bfcl", bfcl),
    ):
        repo = getattr(args, name)
        if repo is None:
            continue
        data = convert(repo)
        path = OUT / f"{data['name']}.json"
        path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        tools = sum(len(b["tools"]) for b in data["backends"])
        multi = sum(len(q["tools"]) > 1 for q in data["queries"])
        print(
            f"{path}: {tools} tools on {len(data['backends'])} backends, "
            f"{len(data['queries'])} queries ({multi} multi-tool)"
        )


if __name__ == "__main__":
    main()
