"""The `Mcp-Param-*` headers of a 2026-07-28 `tools/call`, checked without listing the tools for every call.

The SDK compares a call's `Mcp-Param-*` headers with the arguments its tool's input schema marks
(`x-mcp-header`). Without `Server.get_tool_input_schema` it finds that schema by running the whole
`tools/list` handler (the middleware chain, a server span, the catalog) for every call with arguments: about a
tenth of a replica's CPU per call (docs/team.md, "Figures"). The gateway's own tools mark no argument, and a name
the gateway does not list has no schema either, so while no backend tool is listed directly there is nothing to
compare: the lookup answers None at once, as the listing would have. With backend tools in the list (`expose`
"tools", `listedTools`) their schemas may mark arguments and the list depends on the caller (`server.access`),
which a lookup cannot see (the SDK calls it before any middleware): the SDK then lists as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mcp.server import Server

from agentify.config import Config

SchemaLookup = Callable[[str], Mapping[str, Any] | None]
_Context = TypeVar("_Context")


class ParamHeaderServer(Server[_Context]):
    """The SDK's server whose `get_tool_input_schema` follows the config (`current`, set once the services run)."""

    current: Callable[[], Config] | None = None

    @property  # type: ignore[override]
    def get_tool_input_schema(self) -> SchemaLookup | None:
        """None (the SDK lists the tools) until the config is known and while it lists backend tools."""
        if self.current is None or lists_backend_tools(self.current()):
            return None
        return _nothing_to_compare

    @get_tool_input_schema.setter
    def get_tool_input_schema(self, lookup: SchemaLookup | None) -> None:
        """The SDK's constructor sets it (to None); the property decides."""


def lists_backend_tools(config: Config) -> bool:
    return "tools" in config.expose or bool(config.listed_tools)


def _nothing_to_compare(name: str) -> None:
    return None
