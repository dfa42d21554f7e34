"""JSON schemas of the gateway's own tools, generated from their pydantic models.

Shaped for every client: references inlined (no `$defs`), an optional field that may be null
is just optional (no `["string", "null"]` type arrays, no `anyOf` with null, which Gemini's
function declarations reject), no `title` noise. `additionalProperties: false` comes from a
model that forbids extra keys; a model that ignores them leaves it open, as it behaves.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    schema: dict[str, Any] = _clean(raw, definitions)
    schema.pop("description", None)  # the model's docstring: the tool's own description says it better
    schema.setdefault("properties", {})
    return schema


def _clean(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        return _clean({**target, **{k: v for k, v in node.items() if k != "$ref"}}, definitions)
    options = node.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1:
            merged = {**kept[0], **{k: v for k, v in node.items() if k != "anyOf"}}
            if merged.get("default", "") is None:
                merged.pop("default")
            return _clean(merged, definitions)
    out = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _clean(spec, definitions) for name, spec in value.items()}
        else:
            out[key] = _clean(value, definitions)
    if isinstance(out.get("type"), list):
        raise ValueError(f"a type array in a gateway schema: {out['type']}")
    return out
