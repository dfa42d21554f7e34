"""Putting the mentions of a task (`extract.analyse`) into a tool's arguments, never inventing a value.

- a required argument takes a mention of its role (url, path, paths, ref, key, pattern, text, number) when
  the query has exactly as many such mentions as the tool has such arguments, in order; an enum
  takes the one value the query names; an argument with a schema `default` takes the default; the
  path of a read-only tool named for folders or for searching (`reads_directories`) is the working directory when the
  task mentions no path;
- an optional argument takes a mention only when the words next to it name the argument, or
  two words of its description ("the first 5 lines" -> `head`: "first N lines"); an optional
  enum only when the query names both the argument and one of its values ("dark color scheme"
  -> `colorScheme: dark`), or a value of several words ("the response body" -> `part:
  response-body`, when no other argument has it), or a value said after "by" for an argument named
  so ("by file size" -> `sortBy: size`). When a second argument is named nearly as well ("the
  text disappears": `text` or `textGone`), or a number inside a goal has an argument named next to
  it ("give the agent at most 15 steps"), the value is reported as not placed.
- a destination that is an existing folder takes the source's name in it ("move draft.md into the
  arbigent folder": `arbigent/draft.md`).
- a boolean argument is true when the task says its name, false when "no", "without"... comes just
  before it (`boolean_said`); a required list of strings takes the quoted texts; a quoted text no
  word names an argument for goes to the one optional argument with a plain text name (see
  `vocabulary.py`), unless a word near it names another text argument.
What it could not fill, and the mentions it could not place, are reported, not dropped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from agentify.planner.catalog import CatalogTool, enum_values
from agentify.planner.offline.extract import Kind, Mention, Mentions, resolve_path, without_exclusions
from agentify.planner.offline.left_out import OTHERS, leave_out
from agentify.planner.offline.roles import (
    Role,
    named_in,
    read_only,
    reads_directories,
    replacement_names,
    role,
    takes_role,
)
from agentify.planner.offline.vocabulary import PLAIN_TEXT_NAMES
from agentify.planner.words import stem, words

WINDOW = 3  # words on each side of a value that may name its optional argument
NEAR = 120  # characters on each side that are read for them: linear in the task, however many values it holds
MOVING = frozenset(words("move mv"))
RENAMING = frozenset(words("rename"))  # "rename notes.txt to docs": the new name, even when a folder has it
SOURCE_NAMES = frozenset({"source", "src"})
DESTINATION_NAMES = frozenset({"destination", "dest"})
PREVIEWING = frozenset(words("preview previewing diff"))
DRY = frozenset(words("dry preview"))  # `dryRun`
PROJECT_WORDS = frozenset({"project", "repo", "repository", "codebase"})
SEARCHING = frozenset(words("find search grep lookup"))  # a tool named for searching needs something to search for
TERM_NAMES = frozenset({"text", "regex", "query", "q", "pattern", "term", "keyword", "keywords", "search"})
_BETWEEN = re.compile(r"with|to|for|by|into|->|→", re.IGNORECASE)  # "replace 'a' with 'b'"
_BY_SIZE, _BY_TIME, _BY_NAME = (tuple(words(w)) for w in ("size", "date time modified mtime created updated", "name"))
# Only orders whose direction a sort by that key gives: "smallest first" may well be the reverse.
ORDERS = dict.fromkeys(("biggest", "largest"), _BY_SIZE) | dict.fromkeys(("newest", "latest"), _BY_TIME)
ORDERS |= {"alphabetically": _BY_NAME, "alphabetical": _BY_NAME}
_ORDER = re.compile(
    r"\b(alphabetical(?:ly)?|(?:"
    + "|".join(k for k in ORDERS if not k.startswith("alpha"))
    + r")(?=\s+(?:ones?\s+|files?\s+)?first\b))\b",
    re.IGNORECASE,
)
WHOLE = {stem(w): stem("full") for w in ("whole", "entire")}  # a boolean's name in other words ("the whole page")
# Right before a boolean's name ("without the full page", "non-static", "I don't need the full page") or within a
# few words after it ("fullPage false"), these say false; a required boolean's default gives way only to an
# affirming word.
NEGATORS = frozenset(words("no not without non hide hiding drop dropping aren isn don doesn"))
NEGATED_AFTER = frozenset(words("false off excluded disabled"))
AFFIRMING = frozenset(words("include including includes show showing plus enable enabled"))
AFFIRMED_AFTER = frozenset(words("true included enabled"))
AFTER_WINDOW = 5  # "static assets like images and scripts included"
FOR_ROLE: dict[str, tuple[Kind, ...]] = {
    "url": ("url",),
    "path": ("path", "quoted"),
    "pattern": ("glob", "quoted"),
    "text": ("quoted", "email"),
    "number": ("number",),
    "ref": ("ref",),
    "key": ("key", "quoted"),
    "goal": ("goal", "quoted"),
}


@dataclass(frozen=True)
class Filling:
    arguments: dict[str, Any]
    missing: tuple[str, ...]
    """One phrase per required argument that could not be filled, naming it and why."""
    unplaced: tuple[Mention, ...]
    """Mentions of the query that no argument took: the plan would ignore what the user said."""
    placed: int
    """How many mentions went into required arguments."""
    unfilled: tuple[str, ...] = ()
    """The names of the required arguments without a value (what `missing` describes)."""
    chosen: tuple[Any, ...] = ()
    """The values the task names that required arguments took among their choices (an enum's)."""
    left_out: tuple[Any, ...] = ()
    """The choices the task excludes that the arguments leave out (`leave_out`)."""
    others: tuple[str, ...] = ()
    """The list arguments that took every choice but those the task excludes, since it names none to keep."""
    ignored: tuple[str, ...] = ()
    """What the task excludes that the plan would not leave out ("except the flaky ones"), as the task says it."""
    stray_ids: tuple[str, ...] = ()
    """The ids the task writes that some tool chooses among and this one cannot take (also in `unplaced`)."""

    @property
    def complete(self) -> bool:
        return not self.missing and not self.unplaced and not self.ignored


def fill(tool: CatalogTool, mentions: Mentions) -> Filling:
    """The arguments of `tool` from the query's mentions (see the module docstring)."""
    properties = {n: s for n, s in (tool.input_schema.get("properties") or {}).items() if isinstance(s, dict)}
    required = [n for n in tool.input_schema.get("required") or [] if isinstance(n, str)]
    specs = {n: properties.get(n, {}) for n in required}
    roles = {n: role(n, s) for n, s in specs.items()}
    arguments: dict[str, Any] = {}
    missing: list[str] = []
    pool = list(mentions.values)
    chosen: list[Any] = []
    defaulted: set[str] = set()  # the arguments that took their schema's default: not a value the task set
    tokens = set(re.findall(r"[a-z]+", mentions.user_text.lower()))
    for name in required:
        if roles[name] in ("enum", "enum_list"):
            values = _named_values(specs[name], roles[name], mentions, pool)
            if values and roles[name] == "enum_list" and OTHERS & tokens:  # "run all the scenarios, but checkout first"
                missing.append(f"`{name}` (the task asks for all and names {', '.join(map(str, values))}: say which)")
            elif len(values) == 1 or (values and roles[name] == "enum_list"):
                arguments[name] = values if roles[name] == "enum_list" else values[0]
                chosen += values
            elif values:
                missing.append(f"`{name}` (the task names several of its values: {', '.join(map(str, values))})")
        if name not in arguments and "default" in specs[name] and not any(name in m for m in missing):
            arguments[name] = specs[name]["default"]
            defaulted.add(name)
    for name in (n for n in required if roles[n] == "boolean" and (n not in arguments or n in defaulted)):
        if (said := boolean_said(name, mentions, over_default=name in defaulted)) is not None:
            arguments[name] = said
            defaulted.discard(name)
    for wanted in ("url", "path", "ref", "key", "pattern", "text", "number", "goal"):
        names = [n for n in required if roles[n] == wanted and n not in arguments]
        for kind in FOR_ROLE[wanted] if names else ():
            matching = [m for m in pool if m.kind == kind]
            taking = [n for n in names if kind != "email" or _for_email(n, specs[n])]
            if taking and len(matching) == len(taking):
                for name, mention in zip(taking, matching, strict=True):
                    pool.remove(mention)
                    quoted_path = wanted == "path" and mention.kind == "quoted"
                    arguments[name] = resolve_path(mention.text, mentions.base) if quoted_path else mention.value
                break
    for name in (n for n in required if roles[n] == "replacements"):
        if (pairs := _replacements(pool, mentions.query)) is not None:
            old, new = replacement_names(specs[name]) or ("", "")
            arguments[name] = [{old: a.value, new: b.value} for a, b in pairs]
            pool = [m for m in pool if not any(m is a or m is b for a, b in pairs)]
            if any(roles.get(n) == "path" and isinstance(v, str) and os.path.isdir(v) for n, v in arguments.items()):
                missing.append(f"`{name}` (replacements are made in one file: name the file, not a folder)")
    unfilled = [n for n in required if roles[n] == "path" and n not in arguments]
    if len(unfilled) == 1 and mentions.base and not any(m.kind == "path" for m in mentions.items):
        if reads_directories(tool):
            arguments[unfilled[0]] = mentions.base
    for name in (n for n in required if roles[n] == "paths"):
        if paths := [m for m in pool if m.kind == "path"]:
            arguments[name] = [m.value for m in paths]
            pool = [m for m in pool if m.kind != "path"]
    texts = [n for n in required if roles[n] == "texts" and n not in arguments]
    if len(texts) == 1 and (quoted := [m for m in pool if m.kind == "quoted"]):
        arguments[texts[0]] = [m.value for m in quoted]
        pool = [m for m in pool if m.kind != "quoted"]
    if MOVING & set(words(tool.tool.name)) and not RENAMING & set(words(mentions.user_text)):
        _into_folder(arguments)
    placed = len(mentions.values) - len(pool)
    _fill_optional(properties, set(required), arguments, pool, mentions)
    pool += _named_inside(properties, set(required) | set(arguments), mentions)
    left_out, others = leave_out(properties, set(required), arguments, mentions, defaulted)
    for name in required:
        value = arguments.get(name)
        if name not in arguments:
            missing.append(_missing(name, specs[name], roles[name]))
        elif value is None or (isinstance(value, list) and None in value):
            missing.append(f"`{name}` (a path the context cannot resolve: send the working directory or the open file)")
            arguments.pop(name)
    # "preview replacing ...", "show me the diff of ...": a dry run, or no call to a tool that says it destroys
    if PREVIEWING & set(words(mentions.user_text)):
        dry = [n for n, spec in properties.items() if role(n, spec) == "boolean" and DRY & set(words(n))]
        if dry:
            arguments[dry[0]] = True
        elif tool.tool.annotations is not None and tool.tool.annotations.destructive_hint is True:
            missing.append("a dry run (the task asks for a preview, and the tool has no argument for one)")
    terms = [n for n, spec in properties.items() if n.lower() in TERM_NAMES and role(n, spec) in ("text", "pattern")]
    if SEARCHING & set(words(tool.tool.name)) and terms and not arguments:  # "Give me its element tree": no search
        missing.append(f"{' or '.join(f'`{n}`' for n in terms)} (what to search for: quote it)")
    absent = tuple(dict.fromkeys(n for n in required if n not in arguments))
    # For a tool that takes no path at all, "the arbigent scenarios" (a folder named as the tool is) says where, not
    # what; and for a read-only one, so does the project itself ("what scenarios does this project have?").
    pathless = not takes_role(properties, "path", "paths")
    own = set(words(f"{tool.backend} {tool.tool.name}")) if pathless else set()
    here = mentions.base if pathless and read_only(tool) and mentions.base else None
    unplaced = tuple(m for m in pool if not (m.bare and set(words(m.text)) <= own) and not _is_place(m, here))
    return Filling(arguments, tuple(missing), unplaced, placed, absent, tuple(chosen), tuple(left_out), tuple(others))


def _replacements(pool: list[Mention], query: str) -> list[tuple[Mention, Mention]] | None:
    """The quoted texts of the task in pairs, each 'old' then 'new' with only "with", "to", "for"... between them
    ("change 'example workspace' to 'demo workspace'"), when every quoted text is in one."""
    quoted = [m for m in pool if m.kind == "quoted"]
    pairs = list(zip(quoted[::2], quoted[1::2], strict=False))
    if not quoted or len(quoted) % 2 or not all(_BETWEEN.fullmatch(query[a.end : b.start].strip()) for a, b in pairs):
        return None
    return pairs


def _is_place(mention: Mention, here: str | None) -> bool:
    """Whether `mention` is the project as a whole ("this project", "our repo"), the working directory `here`."""
    project = PROJECT_WORDS.intersection(mention.text.lower().split())
    return here is not None and bool(project) and mention.kind == "path" and mention.value == os.path.normpath(here)


def boolean_said(name: str, mentions: Mentions, *, over_default: bool = False) -> bool | None:
    """A boolean argument as the task says it: true when it says the argument's name ("the whole page" for
    `fullPage`), false when `NEGATORS` come just before it or `NEGATED_AFTER` just after ("without the full page",
    "static=false"), None when it does not say it. `over_default`: the argument has its schema's default, which
    only an affirming word sets true ("including static resources"; not "filter out static resources")."""
    named = set(words(name))
    said = [WHOLE.get(w, w) for w in words(mentions.user_text)]
    if not named or not named <= set(said):
        return None
    spots = [i for i, w in enumerate(said) if w in named]
    before = {said[i - 1] for i in spots if i and said[i - 1] not in named}
    after = {w for i in spots for w in said[i + 1 : i + 1 + AFTER_WINDOW] if w not in named}
    if before & NEGATORS or after & NEGATED_AFTER:
        return False
    return None if over_default and not (before & AFFIRMING or after & AFFIRMED_AFTER) else True


def _into_folder(arguments: dict[str, Any]) -> None:
    """Moving a file to a folder that exists puts it in that folder, keeping its name ("move draft.md into the
    arbigent folder": `arbigent/draft.md`), as `mv` does; the filesystem server would refuse the folder itself.
    Only for a tool named for moving, and not when the task says "rename"."""
    sources = [v for n, v in arguments.items() if n.lower() in SOURCE_NAMES and isinstance(v, str)]
    for name in [n for n in arguments if n.lower() in DESTINATION_NAMES]:
        folder = arguments[name]
        if len(sources) == 1 and isinstance(folder, str) and os.path.isdir(folder):
            if os.path.dirname(sources[0].rstrip("/\\")) != os.path.normpath(folder):
                arguments[name] = os.path.join(folder, os.path.basename(sources[0].rstrip("/\\")))


def _named_inside(properties: dict[str, dict[str, Any]], taken: set[str], mentions: Mentions) -> list[Mention]:
    """The numbers inside a goal that an optional argument is named next to ("give the agent at most 15 steps":
    `maxStep`, or the app's steps?): the plan cannot tell, so they count as values it cannot place."""
    inside = [m for m in mentions.items if m.inside]
    if inside:
        trial = {n: s for n, s in properties.items() if n not in taken}
        _fill_optional(trial, set(), {}, left := list(inside), mentions)
        unnamed = {id(m) for m in left}
        return [m for m in inside if id(m) not in unnamed]
    return []


def _for_email(name: str, spec: dict[str, Any]) -> bool:
    """Whether an argument is for an email address: its name or description says so (`message` is not)."""
    return bool({"email", "mail"} & set(words(f"{name} {spec.get('description') or ''}")))


def _fill_optional(
    properties: dict[str, dict[str, Any]],
    required: set[str],
    arguments: dict[str, Any],
    pool: list[Mention],
    mentions: Mentions,
) -> None:
    optional = {n: s for n, s in properties.items() if n not in required and n not in arguments}
    query_words = set(words(mentions.user_text))
    for name, spec in optional.items():
        if role(name, spec) == "enum":
            values = _named_values(spec, "enum", mentions, pool)
            ordered = _ordered(name, spec, mentions)
            # "the response body": `response-body`, when no other argument has that choice ("no preference")
            phrases = [v for v in values if len(words(str(v))) > 1 and not _shared(v, name, properties)]
            said = set(words(name)) <= query_words or phrases or _by_value(name, values, mentions.query)
            if len(values) == 1 and said or ordered and set(values) <= set(ordered):
                arguments[name] = (values or ordered)[0]
        elif role(name, spec) == "boolean" and (stated := boolean_said(name, mentions)) is not None:
            arguments[name] = stated
    for mention in list(pool):
        before = words(mentions.query[max(0, mention.start - NEAR) : mention.start])[-WINDOW:]
        after = words(mentions.query[mention.end : mention.end + NEAR])[:WINDOW]
        near = set(before + after)
        unit = set(after[:1]) if mention.kind == "number" else set()  # "5 seconds", "no retries": what it counts
        scores: dict[str, int] = {}
        counting: list[str] = []  # the arguments for what the number counts, when no argument is named near it
        for name, spec in optional.items():
            if name in arguments or mention.kind not in FOR_ROLE.get(role(name, spec), ()):
                continue
            named = set(words(name))
            described = set(words(str(spec.get("description") or "")))
            overlap = len(near & described)
            if named <= near or overlap >= 2:
                scores[name] = overlap + (2 if named <= near else 0)
            elif unit & (named | described):
                counting.append(name)
        best = max(scores.values(), default=0)
        winners = [n for n, s in scores.items() if s >= best - 1]  # a close second makes it unclear
        winners = winners if scores else counting
        if not scores and mention.kind == "quoted":
            texts = [n for n, s in optional.items() if n not in arguments and role(n, s) == "text"]
            plain = [n for n in texts if n.lower() in PLAIN_TEXT_NAMES]
            # not when another text argument is named by a word near it ("'Loading' is gone": `textGone`)
            others = any((set(words(n)) - set(words(p))) & near for n in texts for p in plain if n != p)
            winners = [] if others else plain
        if len(winners) == 1:
            arguments[winners[0]] = mention.value
            pool.remove(mention)


def _shared(value: Any, name: str, properties: dict[str, dict[str, Any]]) -> bool:
    """Whether another argument than `name` also chooses among `value`."""
    return any(value in enum_values(spec) for other, spec in properties.items() if other != name)


def _ordered(name: str, spec: dict[str, Any], mentions: Mentions) -> list[Any]:
    """The one choice of an argument named for an order (`sortBy`) that an order in words names: "biggest first"
    (size), "newest first" (a date or time), "alphabetically" (name)."""
    if not name.lower().endswith("by"):
        return []
    said = {key for found in _ORDER.findall(without_exclusions(mentions)) for key in ORDERS[found.lower()]}
    named = [v for v in enum_values(spec) if isinstance(v, str) and said & set(words(v))]
    return named if len(named) == 1 else []


def _by_value(name: str, values: list[Any], query: str) -> bool:
    """ "by size", "by file size" for an argument named `sortBy` (`orderBy`, `groupBy`): the value said after "by"."""
    if len(values) != 1 or not name.lower().endswith("by"):
        return False
    value = r"\W+".join(re.escape(w) for w in str(values[0]).split())
    return re.search(rf"\bby\s+(?:\w+\s+)?{value}\b", query, re.IGNORECASE) is not None


def _named_values(spec: dict[str, Any], kind: Role, mentions: Mentions, pool: list[Mention]) -> list[Any]:
    """Enum values the query names (quoted or not), in the order it names them; longer values match first."""
    options = enum_values(spec) if kind == "enum" else enum_values(spec.get("items") or {})
    values = named_in(options, _words_and_quotes(mentions))
    named = {tuple(words(str(v))) for v in values}
    for quoted in [m for m in pool if m.kind == "quoted" and words(m.text) and tuple(words(m.text)) in named]:
        pool.remove(quoted)  # the choice took it ('Plus' for `plus`): it fills no other argument
    return values


def _words_and_quotes(mentions: Mentions) -> list[str]:
    """The words of the query without its URLs, paths, patterns, numbers and what it excludes, but with quoted
    texts."""
    return words(without_exclusions(mentions))


def _missing(name: str, spec: dict[str, Any], kind: Role) -> str:
    what = {
        "url": "a URL",
        "path": "a path",
        "paths": "one or more paths",
        "pattern": "a pattern (quote it)",
        "text": "a text (quote it)",
        "number": "a number",
        "texts": "one or more texts (quote them)",
        "ref": "an element ref from the page snapshot, such as e5",
        "key": "a key name, such as Enter",
        "boolean": "true or false (say its name)",
        "goal": 'a request like "check that ..." or a quoted text',
        "replacements": "quoted texts in pairs: replace 'old' with 'new'",
        "enum": "one of " + ", ".join(map(str, enum_values(spec))),
        "enum_list": "one or more of " + ", ".join(map(str, enum_values(spec.get("items") or {}))),
    }.get(kind, "a value")
    text = str(spec.get("description") or "")
    described = f": {text if len(text) <= 80 else text[:80].rsplit(' ', 1)[0] + '...'}" if text else ""
    return f"`{name}` (needs {what}{described})"
