"""Unknown config keys: found by walking the data against the pydantic models, so the valid names
are always the models' own (camelCase aliases and snake_case names), never a hand-written list.

A misspelled key is an error naming its path and the closest valid key (`plannr` -> `planner`);
`$comment` is allowed at every level and removed before validation.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

COMMENT = "$comment"


def check_keys(model: type[BaseModel], data: Mapping[str, Any], path: str = "") -> tuple[dict[str, Any], list[str]]:
    """`data` without its `$comment` keys, and one problem per unknown key (`unknown key "plannr" (...)`)."""
    problems: list[str] = []
    cleaned = _walk([model], data, path, problems)
    return cleaned, problems


def unknown_key_problem(key: str, path: str, valid: Collection[str]) -> str:
    """The message for one unknown key at `path`, with the closest of `valid` when one is close."""
    where = f"{path}.{key}" if path else key
    close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    if not close:  # case slips (`LogLevel`) and snake_case typos are still worth a suggestion
        lowered = {v.lower().replace("_", ""): v for v in valid}
        # Closer than above: `contextservers` is 0.62 of `maxcontextchars`, and nothing like it.
        close = difflib.get_close_matches(key.lower().replace("_", ""), list(lowered), n=1, cutoff=0.8)
        close = [lowered[c] for c in close]
    hint = f'did you mean "{close[0]}"?' if close else "valid here: " + ", ".join(sorted(valid))
    return f'unknown key "{where}" ({hint})'


def model_keys(model: type[BaseModel]) -> dict[str, str]:
    """Every spelling a model accepts (alias and field name), mapped to the field name."""
    keys: dict[str, str] = {}
    for name, info in model.model_fields.items():
        keys[name] = name
        if isinstance(info.alias, str):
            keys[info.alias] = name
        if isinstance(info.validation_alias, str):
            keys[info.validation_alias] = name
    return keys


def suggested_keys(model: type[BaseModel]) -> list[str]:
    """The spellings shown to a user: the camelCase aliases (the config file's own style)."""
    return [info.alias if isinstance(info.alias, str) else name for name, info in model.model_fields.items()]


def _walk(models: list[type[BaseModel]], data: Any, path: str, problems: list[str]) -> Any:
    if not isinstance(data, Mapping):
        return data  # a wrong type: pydantic reports it
    strict = any(m.model_config.get("extra") == "forbid" for m in models)
    cleaned: dict[str, Any] = {}
    for key, value in data.items():
        if key == COMMENT:
            continue
        owner = next((m for m in models if key in model_keys(m)), None)
        if owner is None:
            if strict:
                problems.append(unknown_key_problem(key, path, [k for m in models for k in suggested_keys(m)]))
            cleaned[key] = value
            continue
        annotation = owner.model_fields[model_keys(owner)[key]].annotation
        cleaned[key] = _walk_value(annotation, value, f"{path}.{key}" if path else key, problems)
    return cleaned


def _walk_value(annotation: Any, value: Any, path: str, problems: list[str]) -> Any:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _walk([annotation], value, path, problems)
    if origin is Annotated:
        return _walk_value(args[0], value, path, problems)
    if origin is Union or origin is types.UnionType:
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models and isinstance(value, Mapping):
            return _walk(models, value, path, problems)
        others = [a for a in args if a is not type(None) and a not in models]
        return _walk_value(others[0], value, path, problems) if len(others) == 1 else value
    if origin in (list, tuple, set, frozenset, Sequence) and isinstance(value, list) and args:
        return [_walk_value(args[0], item, f"{path}.{i}", problems) for i, item in enumerate(value)]
    if origin in (dict, Mapping) and isinstance(value, Mapping) and len(args) == 2:
        return {k: _walk_value(args[1], v, f"{path}.{k}", problems) for k, v in value.items() if k != COMMENT}
    return value
