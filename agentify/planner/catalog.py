"""The tool catalog every planner sees: backend tools under unique, model-safe names.

Names are `<backend>__<tool>` reduced to `^[a-zA-Z0-9_-]{1,64}$`. A name that had to be
shortened, or that would collide with another, gets a short hash of the original pair,
so two different tools can never share a name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import jsonschema
import mcp_types as types

from agentify._common.naming import MAX_TOOL_NAME, digest_name, safe_name
from agentify.planner.schema_check import Uncheckable, bounded_validator, first_error

if TYPE_CHECKING:
    from agentify.backends.handles import ToolHandle


@dataclass(frozen=True)
class CatalogTool:
    """One backend tool as offered to a planner."""

    name: str
    backend: str
    backend_description: str
    tool: types.Tool
    handle: ToolHandle | None = None  # how to call it; None for recorded tools (eval) that cannot be called

    @property
    def description(self) -> str:
        text = self.tool.description or self.tool.title or self.tool.name
        prefix = f"[{self.backend}" + (f": {self.backend_description}" if self.backend_description else "") + "] "
        return prefix + text

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = dict(self.tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    @property
    def original_name(self) -> str:
        """`<backend>__<tool>` with the backend's own name for the tool (before `tools.overrides`)."""
        return _base_name(self.backend, self.handle.origin if self.handle else self.tool.name)

    @cached_property
    def _validator(self) -> jsonschema.protocols.Validator:
        return bounded_validator(self.input_schema)

    def validation_error(self, arguments: Any, *, absent: Collection[str] = ()) -> str | None:
        """None when `arguments` fit the tool's input schema, else a one-line reason naming the field. `absent`:
        required arguments not given yet (a person is asked for them), whose absence is no error."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, not {type(arguments).__name__}"
        if self.handle is not None and (fixed := sorted(set(arguments) & set(self.handle.pinned))):
            return (
                f"{', '.join(fixed)}: fixed by tools.overrides of backend {self.backend!r} in the gateway's config, "
                "so it cannot be given; leave it out"
            )
        try:
            error = first_error(self._validator, arguments, absent)
        except jsonschema.exceptions.SchemaError as exc:
            return f"the tool's own input schema is invalid: {exc.message}"
        except Uncheckable as exc:
            return f"the arguments cannot be checked against the tool's input schema: {exc}"
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
        return f"{where}: {error.message}"


@dataclass(frozen=True)
class MissingBackend:
    """A configured backend whose tools cannot be offered (it failed before it ever listed them)."""

    id: str
    description: str
    reason: str


class Catalog:
    """Immutable view of every offered tool, keyed by its planner-facing name; `missing` are the
    configured backends that offer none, so a planner can say so when a task is clearly for one."""

    def __init__(self, tools: Iterable[CatalogTool], missing: Iterable[MissingBackend] = ()) -> None:
        self.tools: dict[str, CatalogTool] = {t.name: t for t in tools}
        self._by_origin = {(t.backend, t.tool.name): t for t in self.tools.values()}
        self.missing = tuple(missing)

    @classmethod
    def build(
        cls, backends: Iterable[tuple[str, str, Iterable[types.Tool]]], missing: Iterable[MissingBackend] = ()
    ) -> Catalog:
        """From (backend id, backend description, tools) triples (tools that cannot be called: eval, tests)."""
        return cls._named([(bid, desc, tool, None) for bid, desc, tools in backends for tool in tools], missing)

    @classmethod
    def from_handles(cls, handles: Iterable[ToolHandle], missing: Iterable[MissingBackend] = ()) -> Catalog:
        """From the backend manager's resolved tool handles: every tool can be called through its handle."""
        return cls._named([(h.backend, h.description, h.tool, h) for h in handles], missing)

    @classmethod
    def _named(
        cls, entries: list[tuple[str, str, types.Tool, ToolHandle | None]], missing: Iterable[MissingBackend]
    ) -> Catalog:
        names = [_base_name(bid, tool.name) for bid, _, tool, _ in entries]
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        result = []
        for (bid, desc, tool, handle), name in zip(entries, names, strict=True):
            if counts[name] > 1:
                name = _hashed(name, bid, tool.name)
            result.append(CatalogTool(name=name, backend=bid, backend_description=desc, tool=tool, handle=handle))
        return cls(result, missing)

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> CatalogTool | None:
        return self.tools.get(name)

    def renamed(self, name: str) -> CatalogTool | None:
        """The tool that `tools.overrides` shows under another name, by the name it would have had."""
        return next(
            (t for t in self.tools.values() if t.handle and t.handle.origin != t.tool.name and t.original_name == name),
            None,
        )

    def find(self, backend: str, tool: str) -> CatalogTool | None:
        """The tool by its backend id and the name it is shown under (`tools.overrides` applied): a plan from an
        earlier round."""
        return self._by_origin.get((backend, tool))


def enum_values(spec: dict[str, Any]) -> list[Any]:
    """The values a JSON schema allows when it lists them: its `enum`, also inside `anyOf`/`oneOf` (as zod emits
    nullable enums)."""
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"])
    for key in ("anyOf", "oneOf"):
        for option in spec.get(key) or []:
            if isinstance(option, dict) and isinstance(option.get("enum"), list):
                return list(option["enum"])
    return []


def _base_name(backend: str, tool: str) -> str:
    raw = f"{backend}__{tool}"
    name = safe_name(raw)
    if name != raw and safe_name(tool) != tool:
        return _hashed(name, backend, tool)
    return name if len(name) <= MAX_TOOL_NAME else _hashed(name, backend, tool)


def _hashed(name: str, backend: str, tool: str) -> str:
    return digest_name(name, f"{backend}\0{tool}")
