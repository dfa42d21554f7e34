"""What a person can be asked in a form (MCP form elicitation) for a tool's required arguments.

A form carries only flat, primitive fields: a string (with `minLength`, `maxLength` and one of the formats
`email`, `uri`, `date`, `date-time`), a number or integer (with `minimum`, `maximum`), a boolean, a choice of
strings (`enum`, or `oneOf` of `const` and `title`), or several choices of strings (an array of an enum).
Everything else a tool's schema says (a `pattern`, an object, a list of free texts) is checked when the answer
is validated against the tool's own schema. An argument is not asked when:
- its value is a credential (`secret_argument`: its name, description or title, or a title of its choices, says
  API key, token, password, PIN, verification code...): the MCP spec forbids asking for sensitive information in
  a form; a secret argument is fixed in the config (`tools.overrides`, from the environment);
- its schema is an object, a list of anything but choices, or a choice of non-strings: a form cannot carry it.

`form_schema` builds the form's `requestedSchema`; `answered` turns a form's content back into arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentify.security.credentials import secret_argument

PRIMITIVE = ("string", "number", "integer", "boolean")
FORMATS = frozenset(("email", "uri", "date", "date-time"))
KEEP = {
    "string": ("minLength", "maxLength"),
    "number": ("minimum", "maximum"),
    "integer": ("minimum", "maximum"),
    "boolean": (),
    "array": ("minItems", "maxItems"),
}


class NotAskable(ValueError):
    """An argument that a form must not or cannot ask for; the message names it and says why."""


def form_schema(input_schema: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The `requestedSchema` of a form asking for the arguments `names` of a tool with this input schema,
    each one required, described as the tool describes it.

    Raises:
        NotAskable: one of them is a credential, or no form field can carry it.
    """
    properties = input_schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    fields = {}
    for name in names:
        spec = properties.get(name)
        fields[name] = _field(name, spec if isinstance(spec, dict) else {})
    return {"type": "object", "properties": fields, "required": list(names)}


def answered(schema: Mapping[str, Any], content: Mapping[str, Any] | None) -> dict[str, Any]:
    """The values of a form's answer for the fields `schema` (a `form_schema`) asked, as the tool takes them: a
    whole number given for an integer field becomes an int (clients may send 3.0); a text left blank is no
    answer (an empty path would be read as the working directory); other keys are dropped."""
    fields = schema.get("properties") or {}
    values: dict[str, Any] = {}
    for name, value in (content or {}).items():
        if name not in fields or value is None or (isinstance(value, str) and not value.strip()):
            continue
        if fields[name].get("type") == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        values[name] = value
    return values


def choices(field: Mapping[str, Any]) -> list[Any]:
    """The values a form field (or a schema) chooses among: its `enum`, or the `const` of its `oneOf` or `anyOf`
    options; for a list, those of its `items`. Empty when it takes any value."""
    found = field.get("enum") or [o.get("const") for o in field.get("oneOf") or field.get("anyOf") or []]
    items = field.get("items")
    if not found and isinstance(items, Mapping):
        found = choices(items)
    return list(found) if isinstance(found, list) else []


def _field(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    description = str(spec.get("description") or "")
    if secret_argument(name, " \n".join((description, *_titles(spec)))):
        raise NotAskable(
            f"`{name}` is a credential, which agentify never asks for in a form: fix its value in the config "
            f'instead, with tools.overrides of the backend ("arguments": {{"{name}": "${{VAR}}"}})'
        )
    kind, options = _kind(spec)
    if kind is None:
        raise NotAskable(f"`{name}` takes {_what(spec)}, which a form cannot ask for")
    field: dict[str, Any] = {"type": kind, "title": str(spec.get("title") or name)}
    if description:
        field["description"] = description
    for key in KEEP[kind]:
        if isinstance(spec.get(key), int | float) and not isinstance(spec.get(key), bool):
            field[key] = spec[key]
    if kind == "string" and spec.get("format") in FORMATS:
        field["format"] = spec["format"]
    if kind == "array":
        field["items"] = options
    elif options is not None:
        field |= options
    default = spec.get("default")
    if default is not None and _fits(kind, field, default):
        field["default"] = default
    return field


def _titles(spec: Mapping[str, Any]) -> list[str]:
    """What a form would show of a schema besides its description: its title, its options' and its items'."""
    options = [o for key in ("oneOf", "anyOf") for o in spec.get(key) or [] if isinstance(o, Mapping)]
    items = spec.get("items")
    nested = [*options, *([items] if isinstance(items, Mapping) else [])]
    own = [str(spec["title"])] if spec.get("title") else []
    return own + [title for option in nested for title in _titles(option)]


def _kind(spec: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The form field type of a schema, and its choices (`enum` or `oneOf` for a single choice, the `items` of
    a multiple one); (None, None) when no form field carries it."""
    declared = spec.get("type")
    types_ = [t for t in (declared if isinstance(declared, list) else [declared]) if t not in (None, "null")]
    options = [o for key in ("anyOf", "oneOf") for o in spec.get(key) or [] if isinstance(o, dict)]
    if not types_ and not {"enum", "const"} & set(spec) and options:
        concrete = [o for o in options if o.get("type") != "null"]
        if all("const" in o for o in concrete) and concrete:
            return _titled(concrete)
        return _kind(concrete[0]) if len(concrete) == 1 else (None, None)
    if isinstance(spec.get("enum"), list):
        values = [v for v in spec["enum"] if v is not None]
        if values and all(isinstance(v, str) for v in values) and types_ in ([], ["string"]):
            return "string", {"enum": values}
        return None, None
    if types_ == ["array"]:
        items = spec.get("items")
        kind, choices = _kind(items) if isinstance(items, dict) else (None, None)
        if kind == "string" and choices is not None:
            return "array", {"type": "string"} | choices if "enum" in choices else {"anyOf": choices["oneOf"]}
        return None, None
    if len(types_) == 1 and types_[0] in PRIMITIVE:
        return types_[0], None
    if not types_ and not {"properties", "items", "const", "$ref", "allOf", "not"} & set(spec):
        return "string", None  # a schema that says nothing of its type takes a text, as every other value
    return None, None


def _titled(options: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any] | None]:
    if not all(isinstance(o["const"], str) for o in options):
        return None, None
    return "string", {"oneOf": [{"const": o["const"], "title": str(o.get("title") or o["const"])} for o in options]}


def _fits(kind: str, field: dict[str, Any], value: Any) -> bool:
    if kind == "string":
        allowed = choices(field)
        return isinstance(value, str) and (not allowed or value in allowed)
    if kind in ("number", "integer"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _what(spec: dict[str, Any]) -> str:
    declared = spec.get("type")
    if declared == "object" or "properties" in spec:
        return "an object"
    if declared == "array":
        return "a list"
    if isinstance(spec.get("enum"), list):
        return "a choice of values that are not all texts"
    return "a value of no single plain type" if declared is None else f"a value of type {declared}"
