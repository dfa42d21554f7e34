"""Backend tools in the gateway's own `tools/list` (config `expose` with "tools", or `listedTools`), and
`notifications/tools/list_changed` when what that list shows changes.

The names come from `gateway.exposed.DirectTools`; a call goes through `TaskRunner.call`, the path
of `call_tool` (policy, confirmation, tracing, progress, cancel).
"""

from __future__ import annotations

from typing import Any, Protocol

import mcp_types as types
from loguru import logger

from agentify.backends.offers import Change, ChangeListener
from agentify.gateway.exposed import DirectTools
from agentify.gateway.services import TaskServices
from agentify.mcp_server.offers import ChangeRelay


class DirectServices(TaskServices, Protocol):
    async def backends_changed(self) -> None: ...


async def direct_tools(services: TaskServices, reserved: list[str], *, everyone: bool = False) -> DirectTools:
    """The backend tools as listed to the request's principal (every one's with `everyone`: what a call
    may name, refused by `server.access` if it is not theirs); waits (bounded) for backends still starting,
    as every catalog does."""
    config = services.settings.current
    if "tools" not in config.expose:
        if not config.listed_tools:
            return DirectTools({})
        chosen = DirectTools.chosen(await services.runner.catalog(everyone=everyone), config.listed_tools)
        if unknown := [name for name in config.listed_tools if name not in chosen.listed]:
            logger.warning("listedTools not offered by any backend (yet): {}", ", ".join(unknown))
        return chosen
    catalog = await services.runner.catalog(everyone=everyone)
    direct = DirectTools.of(catalog, prefix=config.prefix, reserved=reserved)
    if direct.clashes:
        logger.warning(
            "more than one tool is called {}: listed as <backend>__<tool> (prefix is false)", ", ".join(direct.clashes)
        )
    return direct


def listed(direct: DirectTools) -> list[types.Tool]:
    """Each tool as its backend describes it (schema, annotations, `_meta`), under its listed name."""
    return [catalog_tool.tool.model_copy(update={"name": name}) for name, catalog_tool in direct.listed.items()]


async def follow_tools(services: DirectServices, relay: ChangeRelay) -> None:
    """Tells the clients whenever a backend's tools change while "tools" is exposed or `listedTools` are; runs
    until cancelled.

    Compared by the backends' tool names once the gateway has listed them again, so a backend that restarts
    with the same tools says nothing, and a client that lists at once sees the new tools. (A backend's own
    `tools/list_changed` is therefore not relayed as it comes: see `heard`.)"""
    shown = _shown_tools(services)
    while True:
        await services.backends_changed()
        now = _shown_tools(services)
        config = services.settings.current
        if now != shown and ("tools" in config.expose or config.listed_tools):
            logger.info("the backends' tools changed: telling the clients (notifications/tools/list_changed)")
            relay.changed(Change("*", "tools"))
        shown = now


def heard(relay: ChangeRelay) -> ChangeListener:
    """What the relay hears of the backends' changes: all but their tool lists, which `follow_tools` covers."""

    def hear(change: Change) -> None:
        if change.kind != "tools":
            relay.changed(change)

    return hear


def _shown_tools(services: TaskServices) -> Any:
    return tuple((b.id, b.enabled, b.tools) for b in services.status().backends)
