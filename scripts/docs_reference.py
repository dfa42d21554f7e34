"""The reference pages of the docs site, generated when the site is built, so they cannot drift.

`mkdocs.yml` names this file as a hook: `on_files` adds `reference/configuration.md` (from the
config's pydantic models) and `reference/cli.md` (from the command line's argparse parser) to
the site. `python scripts/docs_reference.py DIR` writes both pages to DIR, to read them without
building the site.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agentify.cli.parser import build_parser
from agentify.config.models import Config
from agentify.config.sources import ENV_KEYS


def _type(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' for a in args)
    if origin in (Union, types.UnionType):
        shown = [_type(a) for a in args if a is not type(None)]
        return " \\| ".join(shown) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"object of {_type(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    return "" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"


def _bounds(field: FieldInfo) -> str:
    words = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "length ≥", "max_length": "length ≤"}
    shown = [f"{words[name]} {getattr(item, name)}" for item in field.metadata for name in words if hasattr(item, name)]
    return f" ({', '.join(shown)})" if shown else ""


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and every model its fields use, each once, in the order a reader meets them."""
    found = [model]
    for field in model.model_fields.values():
        for inner in _nested(field.annotation):
            found += [m for m in _models(inner) if m not in found]
    return found


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _nested(arg)]


def config_reference() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from agentify's pydantic models when this site is built. Keys are camelCase;",
        "an unknown key is an error that names it. The `mcpServers` map of Cursor, Claude, VS Code and",
        "Windsurf files is read as well: see [Configuration](../configuration.md).",
    ]
    for model in _models(Config):
        lines += ["", f"## {model.__name__}", ""]
        if model is Config:
            lines += ["The top level of the file.", ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for attribute, field in model.model_fields.items():
            key = field.alias or attribute
            meaning = (field.description or "").replace("|", "\\|") + _bounds(field)
            lines.append(f"| `{key}` | {_type(field.annotation)} | {_default(field)} | {meaning.strip()} |")
    lines += ["", "## Environment variables", "", "| variable | sets |", "|---|---|"]
    lines += [f"| `{variable}` | `{'.'.join(key)}` |" for variable, key in ENV_KEYS.items()]
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    parser = build_parser()
    lines = ["# Command-line reference", "", "Generated from agentify's argument parser when this site is built.", ""]
    lines += ["```", parser.format_help().rstrip(), "```"]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        lines += ["", f"## agentify {name}", "", "```", sub.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


PAGES = {"reference/configuration.md": config_reference, "reference/cli.md": cli_reference}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, page in PAGES.items():
        files.append(File.generated(config, path, content=page()))
    return files


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for path, page in PAGES.items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(page())
        print(target / path)
