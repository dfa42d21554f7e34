"""Tools derived from a project: tag to tool name, collisions, and descriptions."""

from __future__ import annotations

from pathlib import Path

from agentify.arbigent.catalog import ALL_TOOL, MAX_TOOL_NAME, build_catalog, tag_tool_names
from agentify.arbigent.project import parse_project

from .support import PROJECT_YAML


def test_each_distinct_tag_gets_a_run_tool_next_to_run_all() -> None:
    catalog = build_catalog(parse_project(PROJECT_YAML, Path("p.yaml")))
    assert [t.name for t in catalog.run_tools] == [
        ALL_TOOL,
        "run-arbigent-test-smoke",
        "run-arbigent-test-login",
        "run-arbigent-test-purchase",
        "run-arbigent-test-settings",
    ]


def test_a_description_names_the_tag_and_the_scenarios_it_runs() -> None:
    catalog = build_catalog(parse_project(PROJECT_YAML, Path("p.yaml")))
    purchase = catalog.find("run-arbigent-test-purchase")
    assert purchase is not None
    assert purchase.tag == "purchase"
    assert purchase.selects == ("checkout",)
    assert "'purchase'" in purchase.description
    assert "checkout (after launch-app -> login)" in purchase.description


def test_characters_outside_the_safe_set_are_replaced() -> None:
    assert tag_tool_names(["dark mode", "ログイン/ok"]) == {
        "dark mode": "run-arbigent-test-dark_mode",
        "ログイン/ok": "run-arbigent-test-_____ok",
    }


def test_colliding_tags_get_distinct_names_and_the_exact_one_keeps_the_plain_name() -> None:
    names = tag_tool_names(["a b", "a_b"])
    assert names["a_b"] == "run-arbigent-test-a_b"
    assert names["a b"].startswith("run-arbigent-test-a_b-")
    assert len(set(names.values())) == 2


def test_collision_resolution_does_not_depend_on_tag_order() -> None:
    assert tag_tool_names(["a b", "a_b", "a.b"]) == tag_tool_names(["a.b", "a_b", "a b"])


def test_a_tag_named_all_does_not_take_the_run_all_tool() -> None:
    names = tag_tool_names(["all"])
    assert names["all"] != ALL_TOOL
    assert names["all"].startswith(ALL_TOOL + "-")


def test_long_tags_give_names_within_the_limit() -> None:
    names = tag_tool_names(["x" * 100, "x" * 101])
    assert all(len(name) <= MAX_TOOL_NAME for name in names.values())
    assert len(set(names.values())) == 2


def test_the_exact_tag_is_kept_for_the_cli() -> None:
    text = 'scenarios:\n- id: a\n  tags:\n  - name: "dark mode"\n'
    catalog = build_catalog(parse_project(text, Path("p.yaml")))
    tool = catalog.find("run-arbigent-test-dark_mode")
    assert tool is not None
    assert tool.tag == "dark mode"


def test_a_tag_with_a_comma_gets_no_tool_because_the_cli_splits_on_commas() -> None:
    text = 'scenarios:\n- id: a\n  tags:\n  - name: "a,b"\n'
    catalog = build_catalog(parse_project(text, Path("p.yaml")))
    assert [t.name for t in catalog.run_tools] == [ALL_TOOL]
    assert catalog.unselectable_tags == ("a,b",)
