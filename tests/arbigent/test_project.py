"""Project loading and the selection rules of `arbigent run` (docs/arbigent-cli-facts.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentify.arbigent.errors import ProjectError
from agentify.arbigent.project import load_project, parse_project

from .support import EXAMPLES, PROJECT_YAML

FACTS = parse_project(PROJECT_YAML, Path("arbigent-project.yaml"))


def test_run_without_filters_selects_the_leaves_in_file_order() -> None:
    assert FACTS.select_all() == ["checkout", "settings-dark-mode"]


def test_tags_select_tagged_scenarios_minus_those_inside_another_selected_chain() -> None:
    assert FACTS.select_tags(["smoke"]) == ["login"]
    assert FACTS.select_tags(["login", "settings"]) == ["login", "settings-dark-mode"]


def test_an_unknown_tag_selects_nothing() -> None:
    assert FACTS.select_tags(["nope"]) == []


def test_tag_match_is_exact_and_case_sensitive() -> None:
    assert FACTS.select_tags(["Login"]) == []


def test_scenario_ids_select_known_ids_in_file_order() -> None:
    assert FACTS.select_ids(["settings-dark-mode", "login", "ghost"]) == ["login", "settings-dark-mode"]


def test_a_chain_runs_root_first() -> None:
    assert FACTS.chain("checkout") == ["launch-app", "login", "checkout"]


def test_tags_are_listed_once_in_order_of_first_appearance() -> None:
    assert FACTS.tags() == ["smoke", "login", "purchase", "settings"]


def test_the_example_project_loads_with_several_tags_and_chains() -> None:
    project = load_project(EXAMPLES / "arbigent-project.yaml")
    assert {"login", "smoke", "purchase", "settings"} <= set(project.tags())
    assert project.chain("checkout") == ["launch-app", "login", "search-product", "add-to-cart", "checkout"]


def test_a_missing_project_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match=r"project file not found: .*missing\.yaml"):
        load_project(tmp_path / "missing.yaml")


def test_a_directory_is_not_a_project_file(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="is a directory"):
        load_project(tmp_path)


def test_invalid_yaml_is_reported_with_file_and_line() -> None:
    with pytest.raises(ProjectError, match=r"p\.yaml is not valid YAML: line 3, column 15: mapping values"):
        parse_project("scenarios:\n- id: a\n  goal: Log in: now\n", Path("p.yaml"))


def test_yaml_without_scenarios_is_not_an_arbigent_project() -> None:
    with pytest.raises(ProjectError, match="no top-level `scenarios` list"):
        parse_project("name: something else\n", Path("p.yaml"))


def test_tags_must_be_maps_with_a_name() -> None:
    with pytest.raises(ProjectError, match=r"scenario 'a': `tags` must be a list of maps"):
        parse_project("scenarios:\n- id: a\n  tags: [login]\n", Path("p.yaml"))


def test_a_dependency_on_an_unknown_scenario_is_an_error() -> None:
    with pytest.raises(ProjectError, match="scenario 'a' depends on unknown scenario 'ghost'"):
        parse_project("scenarios:\n- id: a\n  dependency: ghost\n", Path("p.yaml"))


def test_a_dependency_cycle_is_an_error() -> None:
    text = "scenarios:\n- id: a\n  dependency: b\n- id: b\n  dependency: a\n"
    with pytest.raises(ProjectError, match="dependency cycle a -> b -> a"):
        parse_project(text, Path("p.yaml"))


def test_a_duplicate_scenario_id_is_an_error() -> None:
    with pytest.raises(ProjectError, match="'a' is used twice"):
        parse_project("scenarios:\n- id: a\n- id: a\n", Path("p.yaml"))


def test_a_scenario_without_an_id_is_run_by_all_and_by_its_tag_but_not_by_id() -> None:
    text = 'scenarios:\n- id: a\n  goal: "A"\n- goal: "Open the app."\n  tags:\n  - name: "smoke"\n'
    project = parse_project(text, Path("p.yaml"))
    assert project.ids == ["a"]
    assert project.select_all() == ["a", "<unnamed scenario #2>"]
    assert project.select_tags(["smoke"]) == ["<unnamed scenario #2>"]
    assert project.get("<unnamed scenario #2>") is None


def test_nothing_can_depend_on_a_scenario_without_an_id() -> None:
    with pytest.raises(ProjectError, match="depends on unknown scenario '<unnamed scenario #1>'"):
        parse_project("scenarios:\n- goal: x\n- id: b\n  dependency: '<unnamed scenario #1>'\n", Path("p.yaml"))


def test_a_recursive_alias_is_refused_in_one_line() -> None:
    with pytest.raises(ProjectError, match="an alias refers to a node that contains it"):
        parse_project("scenarios: &s\n- id: a\n  tags: *s\n", Path("p.yaml"))


def test_an_error_about_a_big_value_does_not_print_it() -> None:
    tags = "[" + ", ".join(["[x]"] * 5000) + "]"
    with pytest.raises(ProjectError) as caught:
        parse_project(f"scenarios:\n- id: a\n  tags: {tags}\n", Path("p.yaml"))
    assert len(str(caught.value)) < 300
    assert "a list of 1 entries" in str(caught.value)


def test_aliases_that_stay_small_are_fine() -> None:
    text = "common: &t\n- name: smoke\nscenarios:\n- id: a\n  tags: *t\n- id: b\n  tags: *t\n"
    assert parse_project(text, Path("p.yaml")).select_tags(["smoke"]) == ["a", "b"]
