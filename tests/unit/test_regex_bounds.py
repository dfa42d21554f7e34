"""Every regex in the package, fed 256 KiB of its worst case, finishes within a bound.

The patterns are found by importing every module of `agentify` and collecting the compiled
patterns it holds at module level (alone or in a tuple, list or dict), so a new one is covered
without touching this file. Worst cases are made from the pattern itself: every prefix of an
example of each of its alternatives, repeated to 256 KiB (a match that starts, runs far and fails,
at every position: how `“` without `”` and `${a:-` without `}` were quadratic), and each character
it names, repeated. Each pattern runs in a child process that is killed past its deadline, so a
quadratic one fails the test instead of hanging it.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
import sys
from typing import Any

import pytest

import agentify

SIZE = 256 * 1024
BOUND_SECONDS = 1.0
"""CPU seconds for `findall` over 256 KiB: a linear pattern takes a few milliseconds, a quadratic one
minutes. CPU time, not wall time, so a loaded machine does not fail a linear pattern."""
CHILD_DEADLINE = 120.0
MAX_UNITS = 40

_FUZZ = r"""
import json, re, sys, time
spec = json.loads(sys.stdin.read())
pattern = re.compile(spec["pattern"], spec["flags"])
worst = (0.0, "")
for unit in spec["units"]:
    text = unit * (spec["size"] // len(unit))
    started = time.process_time()
    pattern.findall(text)
    took = time.process_time() - started
    if took > worst[0]:
        worst = (took, unit)
print(json.dumps(worst))
"""


def package_patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    seen: set[tuple[str, int]] = set()
    for module_info in pkgutil.walk_packages(agentify.__path__, "agentify."):
        if module_info.name.endswith("__main__"):  # runs the command line on import
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            held = value.values() if isinstance(value, dict) else value if isinstance(value, tuple | list) else None
            for index, item in enumerate([value] if held is None else held):
                if isinstance(item, re.Pattern) and (item.pattern, item.flags) not in seen:
                    seen.add((item.pattern, item.flags))
                    found[f"{module_info.name}.{name}" + ("" if held is None else f"[{index}]")] = item
    return found


def _examples(tree: Any) -> list[str]:
    """One string the parsed pattern matches (at least roughly) per top-level alternative."""
    import re._constants as c  # type: ignore[import-not-found]
    import re._parser as p  # type: ignore[import-not-found]

    del p

    def walk(items: Any) -> str:
        out = []
        for op, arg in items:
            if op is c.LITERAL:
                out.append(chr(arg))
            elif op is c.NOT_LITERAL:
                out.append("a" if chr(arg) != "a" else "b")
            elif op is c.ANY:
                out.append("a")
            elif op is c.IN:
                out.append(_member(arg, c))
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                low, _, inner = arg
                out.append(walk(inner) * max(low, 1))
            elif op is c.SUBPATTERN:
                out.append(walk(arg[-1]))
            elif op is c.BRANCH:
                out.append(walk(arg[1][0]))
            elif op is c.ATOMIC_GROUP:
                out.append(walk(arg))
        return "".join(out)

    if len(tree) == 1 and tree[0][0] is c.BRANCH:
        return [walk(alternative) for alternative in tree[0][1][1]]
    if len(tree) == 1 and tree[0][0] is c.SUBPATTERN and len(tree[0][1][-1]) == 1:
        return _examples(tree[0][1][-1])
    return [walk(tree)]


def _member(items: Any, c: Any) -> str:
    representative = {c.CATEGORY_SPACE: " ", c.CATEGORY_DIGIT: "0", c.CATEGORY_WORD: "a"}
    if items and items[0][0] is c.NEGATE:
        excluded = {chr(arg) for op, arg in items if op is c.LITERAL}
        return next(ch for ch in "a0 -_.x" if ch not in excluded)
    op, arg = items[0]
    if op is c.LITERAL:
        return chr(arg)
    if op is c.RANGE:
        return chr(arg[0])
    if op is c.CATEGORY:
        return representative.get(arg, "a")
    return "a"


def worst_units(pattern: re.Pattern[str]) -> list[str]:
    """Prefixes of each alternative's example (short ones, half, and all but the last characters), taken
    from every alternative in turn, then each character the pattern names; at most MAX_UNITS."""
    import re._parser as parser  # type: ignore[import-not-found]

    tree = parser.parse(pattern.pattern, pattern.flags)
    per_example = []
    for example in _examples(tree.data if hasattr(tree, "data") else tree):
        n = len(example)
        lengths = sorted({*range(1, min(n, 4) + 1), n // 2, n - 2, n - 1, n} - {0, -1})
        per_example.append([example[:end] for end in reversed(lengths) if end > 0])
    units: dict[str, None] = {}
    for rank in range(max(map(len, per_example), default=0)):
        units.update(dict.fromkeys(prefixes[rank] for prefixes in per_example if rank < len(prefixes)))
    characters = [ch for example in per_example for ch in (example[0] if example else "")]
    units.update(dict.fromkeys([*characters, " ", "a", "0", "\n", "/", ".", "-", '"']))
    return [u for u in units if u][:MAX_UNITS]


PATTERNS = package_patterns()


def test_the_walk_finds_the_patterns_of_every_layer() -> None:
    where = {name.rsplit(".", 1)[0].split(".")[1] for name in PATTERNS}
    assert {"security", "config", "planner", "gateway", "arbigent"} <= where, where
    assert len(PATTERNS) >= 30


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_a_pattern_is_linear_on_256_kib_of_its_worst_case(name: str) -> None:
    pattern = PATTERNS[name]
    spec = {"pattern": pattern.pattern, "flags": pattern.flags, "units": worst_units(pattern), "size": SIZE}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _FUZZ],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=CHILD_DEADLINE,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} ({pattern.pattern!r}) ran past {CHILD_DEADLINE:g} s on 256 KiB of one of its worst cases")
    took, unit = json.loads(done.stdout)
    assert took < BOUND_SECONDS, f"{name} ({pattern.pattern!r}) took {took:.2f} s on {unit!r} repeated to 256 KiB"
