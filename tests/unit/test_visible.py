"""Each principal's view of the catalog (`gateway/visible.py`): remembered per catalog and access rules in force,
and decided again when either changes."""

from __future__ import annotations

from typing import Any

from mcp import types

from agentify.config.server import AccessConfig
from agentify.gateway.visible import CatalogViews
from agentify.planner.catalog import Catalog
from agentify.team.access import Access
from agentify.team.principal import acting_for


def catalog(**backends: list[str]) -> Catalog:
    return Catalog.build(
        (backend, "", [types.Tool(name=name, inputSchema={"type": "object"}) for name in names])
        for backend, names in backends.items()
    )


def access(*rules: dict[str, Any]) -> Access:
    return Access(AccessConfig.model_validate({"rules": list(rules)}))


def seen(views: CatalogViews, tools: Catalog, rules: Access, principal: str, **groups: Any) -> set[str]:
    with acting_for(principal, **groups):
        return set(views.of(tools, rules).tools)


def test_two_people_see_only_their_own_tools_after_the_catalog_changes_and_after_the_rules_are_reloaded() -> None:
    views = CatalogViews()
    rules = access({"principals": ["alice"], "allow": ["fs"]}, {"principals": ["group:web"], "allow": ["web"]})
    before = catalog(fs=["read"], web=["fetch"])
    for _ in range(2):  # the second time from what was remembered
        assert seen(views, before, rules, "alice") == {"fs__read"}
        assert seen(views, before, rules, "bob", groups=frozenset({"web"})) == {"web__fetch"}
        assert seen(views, before, rules, "bob") == set()  # bob without the group is someone else
    after = catalog(fs=["read", "write"], web=["fetch", "post"])  # a backend listed new tools
    assert seen(views, after, rules, "alice") == {"fs__read", "fs__write"}
    assert seen(views, after, rules, "bob", groups=frozenset({"web"})) == {"web__fetch", "web__post"}
    assert seen(views, before, rules, "alice") == {"fs__read"}  # a request that still holds the old catalog
    reloaded = access({"principals": ["alice"], "allow": ["web"]}, {"principals": ["group:web"], "allow": ["fs"]})
    assert seen(views, after, reloaded, "alice") == {"web__fetch", "web__post"}
    assert seen(views, after, reloaded, "bob", groups=frozenset({"web"})) == {"fs__read", "fs__write"}


def test_people_shown_the_same_tools_share_one_view_and_everything_shown_is_the_catalog_itself() -> None:
    views = CatalogViews()
    rules = access({"principals": ["alice", "bob"], "allow": ["fs"]}, {"principals": ["root"], "allow": ["*"]})
    tools = catalog(fs=["read"], web=["fetch"])
    with acting_for("alice"):
        alice = views.of(tools, rules)
    with acting_for("bob"):
        assert views.of(tools, rules) is alice
    with acting_for("root"):
        assert views.of(tools, rules) is tools
    assert views.of(tools, Access(None)) is tools  # without access rules the catalog is everyone's
