"""The fake's `sort` (after 0.81.1) and `wrapper` (0.81.0 on), as SortCommand.kt and WrapperCommand.kt do them.

`sort` moves each scenario after the one it depends on (depth-first from the roots, file order
otherwise); the fake writes no position comments. `--diff` prints a unified diff and
"... Run `arbigent sort` to apply." and exits 1 when anything would move, else "Already sorted: <file>"
and exit 0; without `--diff` the file is rewritten in place.

`wrapper` writes `arbigentw` and its properties. The fake's wrapper cannot download a release: it
runs this fake with FAKE_ARBIGENT_VERSION set to the pinned `distributionVersion`, reading the
properties from beside itself as the real script does, and fails like it when they are missing.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import yaml

FAKE = Path(__file__).resolve().parent.parent / "arbigent"
_RELEASE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def sort(project_file: str, diff: bool, fail: Any) -> NoReturn:
    path = Path(project_file)
    if not path.is_file():
        fail(f"Project file not found: {project_file}")
    original = path.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("scenarios:")), None)
    if start is None:
        fail(f"Cannot sort {project_file}: no scenarios")
    blocks, end = _blocks(lines, start + 1)
    ids = [str((yaml.safe_load("".join(block)) or [{}])[0].get("id")) for block in blocks]
    order = _dependency_order(yaml.safe_load(original).get("scenarios") or [])
    by_id = dict(zip(ids, blocks, strict=True))
    sorted_lines = lines[: start + 1] + [line for sid in order for line in by_id[sid]] + lines[end:]
    revised = "".join(sorted_lines)
    if revised == original:
        sys.stdout.write(f"Already sorted: {project_file}\n")
        sys.exit(0)
    moved = sum(1 for a, b in zip(ids, order, strict=True) if a != b)
    summary = f"{moved} scenario{'' if moved == 1 else 's'} out of place, 0 position comments stale."
    if diff:
        sorted_name = f"{project_file} (sorted)"
        patch = difflib.unified_diff(original.splitlines(), revised.splitlines(), project_file, sorted_name)
        sys.stdout.write("\n".join(line.rstrip("\n") for line in patch) + "\n")
        sys.stdout.write(f"{summary} Run `arbigent sort` to apply.\n")
        sys.exit(1)
    path.write_text(revised, encoding="utf-8")
    sys.stdout.write(f"Sorted {project_file}: {summary}\n")
    sys.exit(0)


def _blocks(lines: list[str], first: int) -> tuple[list[list[str]], int]:
    """The scenario items of the `scenarios:` list (each `- ` line and what follows it), and where the list ends."""
    blocks: list[list[str]] = []
    index = first
    while index < len(lines):
        line = lines[index]
        if line.strip() and not line.startswith((" ", "-", "#")):
            break
        if line.lstrip().startswith("- ") and len(line) - len(line.lstrip()) == _indent(lines, first):
            blocks.append([])
        if blocks:
            blocks[-1].append(line)
        index += 1
    return blocks, index


def _indent(lines: list[str], first: int) -> int:
    item = next(line for line in lines[first:] if line.lstrip().startswith("- "))
    return len(item) - len(item.lstrip())


def _dependency_order(scenarios: list[dict[str, Any]]) -> list[str]:
    ids = [str(s.get("id")) for s in scenarios]
    children: dict[str, list[str]] = {}
    roots = []
    for scenario in scenarios:
        parent = scenario.get("dependency")
        if parent in ids:
            children.setdefault(parent, []).append(str(scenario.get("id")))
        else:
            roots.append(str(scenario.get("id")))
    order: list[str] = []

    def visit(scenario_id: str) -> None:
        order.append(scenario_id)
        for child in children.get(scenario_id, []):
            visit(child)

    for root in roots:
        visit(root)
    return order


def wrapper(own_version: str, properties_path: str, options: dict[str, str], fail: Any) -> NoReturn:
    version = options.get("version") or own_version
    if "version" not in options and not _RELEASE.match(own_version):
        fail(
            f"This CLI reports version '{own_version}', which is not a published release. "
            "Pass --version <version> to pin a released version."
        )
    url = options.get("distribution-url") or (
        f"https://github.com/takahirom/arbigent/releases/download/{version}/arbigent-{version}.tar.gz"
    )
    checksum = options.get("sha256")
    if checksum is None:
        fail(f"Cannot read {url}.sha256 (the test double has no network). Pass --sha256 <digest> instead.")
    if not _SHA256.match(checksum):
        fail(f"'{checksum}' is not a lowercase hex SHA-256 digest.")
    root = Path(options.get("dir") or ".").resolve()
    script, properties = root / "arbigentw", root / properties_path
    properties.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(_SCRIPT.replace("@PROPERTIES@", properties_path).replace("@FAKE@", str(FAKE)))
    script.chmod(0o755)
    properties.write_text(f"distributionVersion={version}\ndistributionUrl={url}\ndistributionSha256Sum={checksum}\n")
    sys.stdout.write(f"Wrote {script}\nWrote {properties}\n")
    sys.exit(0)


_SCRIPT = """#!/bin/sh
# Arbigent wrapper, test double: runs the fake arbigent as the release pinned in the properties beside it.
set -eu
SCRIPT_DIR=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd -P)
PROPERTIES_FILE="$SCRIPT_DIR/@PROPERTIES@"
if [ ! -f "$PROPERTIES_FILE" ]; then
  echo "arbigentw: cannot read $PROPERTIES_FILE." >&2
  exit 1
fi
PATTERN='s/^[[:space:]]*distributionVersion[[:space:]]*=[[:space:]]*//p'
FAKE_ARBIGENT_VERSION=$(sed -n "$PATTERN" "$PROPERTIES_FILE" | tail -n 1)
export FAKE_ARBIGENT_VERSION
exec "@FAKE@" "$@"
"""
