"""What the principal of the request may see and use of the backends' tools, by `server.access`
(`team.access`): its view of the catalog (the planners', `search_tools`' and `tools/list`'s), of
`list_backends`, and the check of a plan before it runs.

Principals that may see the same tools share one catalog view, so a team whose people have the same
rules builds one view (and one retrieval index) for all of them; without `access` the full catalog is
everyone's.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

from agentify.backends import BackendStatus
from agentify.planner import Plan
from agentify.planner.catalog import Catalog, CatalogTool
from agentify.team.access import Access, tool_target
from agentify.team.policy import Target
from agentify.team.principal import Who, current_who

MAX_VIEWS = 16
MAX_PRINCIPALS = 1024
"""The principals (with their groups and scopes) whose view is remembered; the others' is decided again."""


def target_of(tool: CatalogTool) -> Target:
    return tool_target(tool.backend, tool.name, tool.handle.origin if tool.handle else tool.tool.name)


class CatalogViews:
    """The catalog each principal sees, kept for the last few distinct views.

    What a principal is shown is decided tool by tool once per catalog and decision set: a catalog is a new
    object when a backend's tools change (list_changed, a backend started or stopped, pins approved) and an
    `Access` a new one when the rules or the policy are reloaded, so both are the version of what is shown."""

    def __init__(self) -> None:
        self._views: OrderedDict[tuple[int, int, frozenset[str]], tuple[Catalog, Catalog]] = OrderedDict()
        self._version: tuple[Catalog, Access] | None = None
        self._shown: dict[Who, Catalog] = {}
        """Each principal's view of the catalog and access of `_version`."""

    def of(self, catalog: Catalog, access: Access) -> Catalog:
        if not access.active:
            return catalog
        if self._version is None or self._version[0] is not catalog or self._version[1] is not access:
            self._version, self._shown = (catalog, access), {}
        who = current_who()
        view = self._shown.get(who)
        if view is None:
            if len(self._shown) >= MAX_PRINCIPALS:
                self._shown.clear()
            view = self._shown[who] = self._view(catalog, access, who)
        return view

    def _view(self, catalog: Catalog, access: Access, who: Who) -> Catalog:
        """The catalog of the tools `who` is shown: one object for everyone shown the same tools."""
        names = frozenset(name for name, tool in catalog.tools.items() if access.shows(target_of(tool), who))
        if len(names) == len(catalog.tools):
            return catalog
        key = (id(catalog), id(access), names)
        found = self._views.get(key)
        if found is not None and found[0] is catalog:  # the id of a catalog still alive: the same one
            self._views.move_to_end(key)
            return found[1]
        view = Catalog((t for name, t in catalog.tools.items() if name in names), catalog.missing)
        self._views[key] = (catalog, view)
        while len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)
        return view


def check_plan(access: Access, plan: Plan, catalog: Catalog) -> None:
    """Raises Forbidden when the principal may not make this call (its tool, or its arguments)."""
    if not access.active:
        return
    tool = catalog.find(plan.backend, plan.tool)
    if tool is None:
        target = tool_target(plan.backend, f"{plan.backend}__{plan.tool}", plan.tool)
    else:
        target = target_of(tool)
    access.check(target, {"arguments": plan.arguments})


def check_unlisted(access: Access, name: str, arguments: Any) -> None:
    """Raises Forbidden when the principal may not call `name` (`<backend>__<tool>`), a tool no catalog lists yet
    (a backend reached as each person, before anyone authorized it): decided on the backend and the name."""
    backend, _, tool = name.partition("__")
    access.check(tool_target(backend, name, tool), {"arguments": arguments if isinstance(arguments, dict) else {}})


def hidden_tool(access: Access, name: str, catalog: Catalog) -> Target | None:
    """The tool `name` (as `call_tool` names it) when it exists but the principal is not shown it."""
    tool = catalog.get(name)
    if tool is None or not access.active:
        return None
    target = target_of(tool)
    return None if access.shows(target) else target


def visible_backends(access: Access, backends: list[BackendStatus], catalog: Catalog) -> list[BackendStatus]:
    """`list_backends` for the principal: the backends it may use, each with the tools it may see."""
    if not access.active:
        return backends
    by_backend: dict[str, list[CatalogTool]] = {}
    for tool in catalog.tools.values():
        by_backend.setdefault(tool.backend, []).append(tool)
    shown = []
    for status in backends:
        tools = by_backend.get(status.id, [])
        if not access.shows_backend(status.id, [target_of(t) for t in tools]):
            continue
        own = {t.tool.name for t in tools if access.shows(target_of(t))}
        shown.append(dataclasses.replace(status, tools=tuple(t for t in status.tools if t in own)))
    return shown
