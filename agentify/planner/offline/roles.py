"""What each argument of a tool takes, from its schema and name (`role`), and the choices a tool's arguments offer:
the vocabulary that `fill` puts a task's values into and that the planner weighs tools by.

- `role`: a URL, a path or several, a pattern, a text or several, a number, a choice or several, an element ref, a
  key, a boolean, a goal in plain words, replacements of one text by another, or something else;
- `choices`, `takes_value`, `takes_goal`, `read_only`, `reads_directories`: what a tool offers as a whole;
- `named_in`: the choices a run of words names.
"""

from __future__ import annotations

from typing import Any, Literal

from agentify.planner.catalog import CatalogTool, enum_values
from agentify.planner.offline.vocabulary import KEY_NAMES, REF_NAMES
from agentify.planner.words import words

Role = Literal[
    "url",
    "path",
    "paths",
    "pattern",
    "text",
    "texts",
    "number",
    "enum",
    "enum_list",
    "ref",
    "key",
    "boolean",
    "goal",
    "replacements",
    "other",
]
URL_NAMES = frozenset({"url", "uri", "href", "link", "address"})
PATH_NAMES = frozenset({"path", "file", "filename", "filepath", "file_path", "source", "destination", "src", "dest"})
PATH_NAMES |= frozenset({"dir", "directory", "folder", "root", "cwd"})
PATTERN_NAMES = frozenset({"pattern", "glob", "regex", "query"})
DIRECTORY_WORDS = frozenset(words("directory folder dir tree search"))
OLD_WORDS = frozenset(words("old from search find original before"))  # `oldText`: what a replacement replaces
NEW_WORDS = frozenset(words("new to replace replacement after"))  # `newText`: what it puts there


def role(name: str, spec: dict[str, Any]) -> Role:
    """What kind of value an argument takes, from its schema and name."""
    declared = spec.get("type")
    kinds = set(declared) if isinstance(declared, list) else {declared}
    items: dict[str, Any] = spec["items"] if isinstance(spec.get("items"), dict) else {}
    lowered = name.lower()
    if enum_values(spec):
        return "enum"
    if "array" in kinds and enum_values(items):
        return "enum_list"
    if kinds == {"boolean"}:
        return "boolean"
    if "string" in kinds and (lowered in REF_NAMES or lowered.endswith(tuple(REF_NAMES))):
        return "ref"
    if "string" in kinds and lowered in KEY_NAMES:
        return "key"
    if "string" in kinds:
        if lowered == "goal":
            return "goal"
        if lowered in URL_NAMES or lowered.endswith("url") or spec.get("format") in ("uri", "url"):
            return "url"
        if lowered in PATH_NAMES or lowered.endswith(("path", "dir", "directory")):
            return "path"
        return "pattern" if lowered in PATTERN_NAMES else "text"
    if "array" in kinds and items.get("type") == "string" and lowered.endswith(("paths", "files")):
        return "paths"
    if "array" in kinds and items.get("type") == "string":
        return "texts"
    if "array" in kinds and replacement_names(spec) is not None:
        return "replacements"
    return "number" if kinds & {"number", "integer"} else "other"


def takes_role(properties: dict[str, Any], *roles: Role) -> bool:
    """Whether an argument of `properties` takes one of `roles` ("path", "url"...)."""
    return any(isinstance(spec, dict) and role(name, spec) in roles for name, spec in properties.items())


def replacement_names(spec: dict[str, Any]) -> tuple[str, str] | None:
    """The names of what a replacement replaces and what it puts there, for a list of objects that each require
    exactly those two texts (`edits: [{oldText, newText}]`)."""
    items: dict[str, Any] = spec["items"] if isinstance(spec.get("items"), dict) else {}
    properties: dict[str, Any] = items["properties"] if isinstance(items.get("properties"), dict) else {}
    required = [n for n in items.get("required") or [] if isinstance(n, str)]
    if items.get("type") != "object" or len(required) != 2:
        return None
    if not all(isinstance(properties.get(n), dict) and properties[n].get("type") == "string" for n in required):
        return None
    first = {n: (words(n) or [""])[0] for n in required}
    old = [n for n in required if first[n] in OLD_WORDS]
    new = [n for n in required if first[n] in NEW_WORDS]
    return (old[0], new[0]) if len(old) == 1 and len(new) == 1 and old != new else None


def takes_goal(tool: CatalogTool) -> bool:
    """A tool with a required string argument `goal`: a task in plain words."""
    spec = (tool.input_schema.get("properties") or {}).get("goal")
    return (
        "goal" in (tool.input_schema.get("required") or []) and isinstance(spec, dict) and role("goal", spec) == "goal"
    )


def choices(tool: CatalogTool) -> list[Any]:
    """The values that `tool`'s required enum arguments choose among (a test runner's scenario ids)."""
    properties = tool.input_schema.get("properties") or {}
    values: list[Any] = []
    for name in tool.input_schema.get("required") or []:
        spec = properties.get(name)
        if not isinstance(spec, dict):
            continue
        kind = role(name, spec)
        if kind == "enum":
            values += enum_values(spec)
        elif kind == "enum_list":
            values += enum_values(spec.get("items") or {})
    return values


def takes_value(tool: CatalogTool, value: str) -> bool:
    """Whether an argument of `tool` could hold `value`: one that chooses among it, or a free text."""
    for spec in (tool.input_schema.get("properties") or {}).values():
        if not isinstance(spec, dict):
            continue
        options = enum_values(spec) or enum_values(spec.get("items") or {})
        declared = spec.get("type")
        kinds = declared if isinstance(declared, list) else [declared]
        if any(str(o).lower() == value.lower() for o in options) or (not options and "string" in kinds):
            return True
    return False


def read_only(tool: CatalogTool) -> bool:
    """Whether `tool` declares that it changes nothing (`readOnlyHint: true`)."""
    return tool.tool.annotations is not None and tool.tool.annotations.read_only_hint is True


def reads_directories(tool: CatalogTool) -> bool:
    """A read-only tool whose name says it works on a folder (`list_directory`, `directory_tree`) or searches one
    (`search_files`): a task that names no path means the working directory ("list the files", "search for
    *.md")."""
    return read_only(tool) and not DIRECTORY_WORDS.isdisjoint(words(tool.tool.name))


def named_in(options: list[Any], said: list[str]) -> list[Any]:
    """The choices among `options` that the words `said` name, in the order said: each as its words in a row,
    longer choices first and no word in two ("login-wrong-password" does not also name `login`)."""
    used = [False] * len(said)
    found: list[tuple[int, Any]] = []
    for value in sorted((o for o in options if isinstance(o, str)), key=lambda o: -len(words(o))):
        target = words(value)
        for i in range(len(said) - len(target) + 1) if target else ():
            if said[i : i + len(target)] == target and not any(used[i : i + len(target)]):
                used[i : i + len(target)] = [True] * len(target)
                found.append((i, value))
                break
    return list(dict.fromkeys(v for _, v in sorted(found, key=lambda f: f[0])))
