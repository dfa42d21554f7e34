"""Argument validation against a backend's schema: its regexes run under a time budget."""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types

from agentify.planner.catalog import CatalogTool
from agentify.planner.schema_check import BUDGET_SECONDS


def problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    tool = types.Tool(name="t", input_schema={"type": "object"} | schema)
    return CatalogTool(name="b__t", backend="b", backend_description="", tool=tool).validation_error(arguments)


def test_patterns_still_decide_as_json_schema_says() -> None:
    schema = {"properties": {"id": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"}}}
    assert problem(schema, {"id": "abc-12"}) is None
    assert "does not match" in (problem(schema, {"id": "ABC"}) or "")
    keys = {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert problem(keys, {"x-a": 1}) is None
    assert "x-a" in (problem(keys, {"x-a": "one"}) or "")
    assert "'other'" in (problem(keys, {"other": 1}) or "")
    plain = {"properties": {"a": {}}, "additionalProperties": False}
    assert "Additional properties are not allowed ('b' was unexpected)" in (problem(plain, {"b": 1}) or "")


def test_a_catastrophic_pattern_is_cut_off_by_the_budget() -> None:
    for schema, arguments in [
        ({"properties": {"code": {"type": "string", "pattern": "^(a|a)+$"}}}, {"code": "a" * 60 + "!"}),
        ({"patternProperties": {"^(a|a)+$": {}}}, {"a" * 60 + "!": 1}),
        ({"patternProperties": {"^(a|a)+$": {}}, "additionalProperties": False}, {"a" * 60 + "!": 1}),
        ({"propertyNames": {"pattern": "^(a|a)+$"}}, {"a" * 60 + "!": 1}),
    ]:
        started = time.monotonic()
        found = problem(schema, arguments)
        # Unbounded, this pattern would run for centuries; the margin only absorbs a loaded machine.
        assert time.monotonic() - started < BUDGET_SECONDS + 10
        assert found is not None and "took too long to check" in found, found


def test_a_pattern_that_is_no_regex_is_reported_not_raised() -> None:
    found = problem({"properties": {"a": {"type": "string", "pattern": "(unclosed"}}}, {"a": "x"})
    assert found is not None and "is not a regular expression" in found


def test_unevaluated_properties_beside_pattern_properties_are_left_to_the_backend() -> None:
    schema = {"patternProperties": {"^(a|a)+$": {}}, "unevaluatedProperties": False}
    assert problem(schema, {"zzz": 1}) is None
    assert problem({"properties": {"a": {}}, "unevaluatedProperties": False}, {"zzz": 1}) is not None
