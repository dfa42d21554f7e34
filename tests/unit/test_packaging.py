"""The distribution declares what the code imports, with bounds no looser than the MCP SDK's, and
`agentify --version` answers without loading the SDK."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRA_ONLY = {"console": REPO / "agentify" / "console"}
"""Imports under these folders may come from the extra of that name: the code loads them only when
the feature is used."""


def _requirements(names: list[str]) -> dict[str, Requirement]:
    return {_normal(req.name): req for req in map(Requirement, names)}


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them (`prometheus_client` is `prometheus-client`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
    }
    return {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"agentify", "__future__"}


def test_every_imported_distribution_is_declared() -> None:
    core = _requirements(PROJECT["dependencies"])
    owners = importlib.metadata.packages_distributions()
    missing = []
    for path in sorted((REPO / "agentify").rglob("*.py")):
        extras = [name for name, folder in EXTRA_ONLY.items() if folder in path.parents]
        allowed = set(core) | {r for e in extras for r in _requirements(PROJECT["optional-dependencies"][e])}
        for module in _imported(path):
            dists = {_normal(d) for d in owners.get(module, [module])}
            if not dists & allowed:
                missing.append(f"{path.relative_to(REPO)} imports {module} ({', '.join(sorted(dists))})")
    assert not missing, "declare these in pyproject.toml:\n" + "\n".join(missing)


def test_bounds_are_no_looser_than_the_mcp_sdks() -> None:
    ours = _requirements(PROJECT["dependencies"])
    for theirs in map(Requirement, importlib.metadata.requires("mcp") or []):
        mine = ours.get(_normal(theirs.name))
        if mine is None or theirs.marker is not None and not theirs.marker.evaluate():
            continue
        floor = [Version(s.version) for s in theirs.specifier if s.operator == ">="]
        own = [Version(s.version) for s in mine.specifier if s.operator in (">=", "==")]
        assert own and max(own) >= max(floor, default=Version("0")), f"{mine} is looser than mcp's {theirs}"
    assert any(s.operator == "<" for s in ours["openai"].specifier), "openai needs an upper bound"


def test_version_answers_without_loading_the_sdk() -> None:
    probe = (
        "import sys\nfrom agentify.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'openai', 'httpx2')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["agentify 0.1.0", "[]"]


def test_serving_without_a_planner_key_or_redis_loads_neither_client() -> None:
    """Every gateway start paid 0.8 s of CPU for the openai package and 0.3 s for redis, used by few."""
    probe = (
        "import sys\nimport agentify.cli.serve, agentify.gateway.services, agentify.mcp_server.server\n"
        "from agentify.config import PlannerConfig\nfrom agentify.planner.select import PlannerSelector\n"
        "PlannerSelector(PlannerConfig())\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'redis'}))\n"
        "PlannerSelector(PlannerConfig(api_key='k'))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'redis'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["[]", "['openai']"]
