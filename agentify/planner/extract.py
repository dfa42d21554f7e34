"""What a query says besides its words: the values the offline planner may put into arguments.

`analyse` finds the mentions of a task: quoted strings, URLs (a bare `localhost:3000/login`
becomes `http://localhost:3000/login`), paths (resolved against the working directory, else the
active document's folder; "this file" and "here" mean the active document and the working
directory; a bare word is a path when it follows "named"/"called", or when it exists and follows
"in", "of", "from"... or precedes "folder"), glob patterns and numbers (`1280x720` is two).
It also gives the terms to rank tools with: the user's own words, without the mentions (so
`arbigent/arbigent-project.yaml` does not read as a request for the arbigent tools), plus, at
`HINT_WEIGHT`, the kind of argument each mention fills ("url"; "path", "directory"; "path",
"file", "text"; "single" or "multiple" for the number of paths).

`goal_request` reads a request to check something ("check that ...", "verify whether ...", "make
sure ...") that names no path or URL as one mention, the whole query, for a tool whose required
`goal` argument takes a task in plain words (the arbigent runner's `run-arbigent-task`); the
planner asks for it only when such a tool exists.

`fill` puts mentions into a tool's arguments, never inventing a value:
- a required argument takes a mention of its role (url, path, paths, pattern, text, number) when
  the query has exactly as many such mentions as the tool has such arguments, in order; an enum
  takes the one value the query names; an argument with a schema `default` takes the default;
- an optional argument takes a mention only when the words next to it name the argument, or
  two words of its description ("the first 5 lines" -> `head`: "first N lines"); an optional
  enum only when the query names both the argument and one of its values ("dark color scheme"
  -> `colorScheme: dark`).
What it could not fill, and the mentions it could not place, are reported, not dropped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentify.planner import TaskContext, TaskInput
from agentify.planner.catalog import CatalogTool
from agentify.planner.prompt import document_path
from agentify.planner.retrieval import STOP_WORDS, query_terms, words

Kind = Literal["url", "path", "quoted", "glob", "number", "goal"]
Role = Literal["url", "path", "paths", "pattern", "text", "number", "enum", "enum_list", "goal", "other"]

# Top-level domains that make a bare `name.tld/...` a web address rather than a file name.
WEB_TLDS = frozenset("com org net io dev app edu gov co uk de fr eu us ca info biz ai cloud site page".split())
TEXT_EXTENSIONS = frozenset(
    "txt md markdown rst json jsonl yaml yml toml ini cfg conf csv tsv xml html htm css js mjs ts tsx jsx py rb go "
    "rs java kt c h cpp hpp sh bash zsh sql log env gitignore lock properties gradle swift".split()
)
MEDIA_EXTENSIONS = frozenset("png jpg jpeg gif webp svg bmp ico mp3 wav ogg flac mp4 webm mov pdf".split())
NOT_PATHS = frozenset({"e.g", "i.e", "etc", "vs"})
PATH_PREPOSITIONS = frozenset({"in", "inside", "under", "from", "into", "within", "of", "at", "to"})
NAMING_WORDS = frozenset({"named", "called"})
FOLDER_WORDS = frozenset({"folder", "directory", "dir"})
WINDOW = 3  # words on each side of a value that may name its optional argument
HINT_WEIGHT = 0.5  # a kind of argument is evidence, but less than a word the user chose

URL_NAMES = frozenset({"url", "uri", "href", "link", "address"})
PATH_NAMES = frozenset({"path", "file", "filename", "filepath", "file_path", "source", "destination", "src", "dest"})
PATH_NAMES |= frozenset({"dir", "directory", "folder", "root", "cwd"})
PATTERN_NAMES = frozenset({"pattern", "glob", "regex", "query"})
FOR_ROLE: dict[str, tuple[Kind, ...]] = {
    "url": ("url",),
    "path": ("path", "quoted"),
    "pattern": ("glob", "quoted"),
    "text": ("quoted",),
    "number": ("number",),
    "goal": ("goal", "quoted"),
}
_GOAL_REQUEST = re.compile(
    r"^\s*(?:please\s+)?(?:(?:check|verify|confirm|ensure|test)\s+(?:that|whether|if)|make\s+sure(?:\s+that)?)\s+\S",
    re.IGNORECASE,
)

_QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”|`([^`\n]+)`|(?<!\w)\'([^\'\n]+)\'(?!\w)')
_SCHEME_URL = re.compile(r"\b(?:https?|wss?|ftp)://[^\s\"'<>`]+", re.IGNORECASE)
_BARE_URL = re.compile(
    r"(?<![\w@/.:-])((?:localhost|\d{1,3}(?:\.\d{1,3}){3}|(?:[a-z0-9-]+\.)+[a-z]{2,})(:\d{1,5})?(/[^\s\"'<>`]*)?)",
    re.IGNORECASE,
)
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_DOCUMENT = re.compile(r"\b(?:this|the (?:current|open|active)|current|active) (?:file|document|doc)\b", re.I)
_DIRECTORY = re.compile(
    r"\b(?:here|this (?:folder|directory|dir|workspace|project)|(?:the )?(?:current|working) (?:folder|directory|dir)"
    r"|the workspace)\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\S+")
_FILE_NAME = re.compile(r"(?:[\w@+-][\w.@+-]*)?\w\.[A-Za-z][A-Za-z0-9]{0,7}|\.[A-Za-z0-9][\w.-]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SIZE = re.compile(r"(\d+)[x×](\d+)")
_EDGE = "\"'`,;:!?()[]{}<>"


@dataclass(frozen=True)
class Mention:
    kind: Kind
    text: str
    """As written in the query."""
    value: Any
    """URL with scheme, absolute path (None when it cannot be resolved), number, or the text itself."""
    start: int
    end: int


@dataclass(frozen=True)
class Mentions:
    query: str
    items: tuple[Mention, ...]
    user_text: str
    """The query without its mentions: only the words the user chose."""
    hints: tuple[str, ...]
    """The kinds of argument the mentions fill, as words ("url", "path", "directory", "single"...)."""
    base: str | None
    """Where relative paths resolve: the working directory, else the active document's folder."""

    def terms(self) -> dict[str, float]:
        """What tools are ranked by: the user's words (and synonyms), and the hints at `HINT_WEIGHT`."""
        terms = query_terms(self.user_text)
        for hint in words(" ".join(self.hints)):
            terms[hint] = max(terms.get(hint, 0.0), HINT_WEIGHT)
        return terms


def analyse(task: TaskInput) -> Mentions:
    context = task.context or TaskContext()
    document = document_path(context.active_document_uri)
    document = document if document and os.path.isabs(document) else None
    base = context.current_working_directory or (os.path.dirname(document) if document else None)
    query = task.query
    found: list[tuple[Mention, str]] = []  # each with the kind of argument it fills, as words
    taken = [False] * len(query)

    def take(mention: Mention, replacement: str) -> None:
        taken[mention.start : mention.end] = [True] * (mention.end - mention.start)
        found.append((mention, replacement))

    for match in _QUOTED.finditer(query):
        text = next(g for g in match.groups() if g is not None)
        take(*_quoted(text, match.start(), match.end(), base))
    for pattern in (_SCHEME_URL, _BARE_URL):
        for match in pattern.finditer(query):
            text = match.group(0).rstrip(".,;:!?)]}")
            end = match.start() + len(text)
            url = _url(text)
            if url is not None and not any(taken[match.start() : end]):
                take(Mention("url", text, url, match.start(), end), "url")
    for pattern, value, kind in ((_DOCUMENT, document, "file"), (_DIRECTORY, base, "directory")):
        for match in pattern.finditer(query):
            if not any(taken[match.start() : match.end()]):
                hint = _path_hint(value) if value else kind
                take(Mention("path", match.group(0), value, match.start(), match.end()), "path " + hint)
    tokens = [(m.start(), m.group(0)) for m in _TOKEN.finditer(query)]
    for i, (position, raw) in enumerate(tokens):
        token = raw.strip(_EDGE)
        token = token if token in (".", "..") else token.rstrip(".")
        start = position + raw.find(token) if token else position
        end = start + len(token)
        if not token or any(taken[start:end]):
            continue
        before = [t.lower().strip(_EDGE) for _, t in tokens[max(0, i - 2) : i]]
        after = tokens[i + 1][1].lower().strip(_EDGE) if i + 1 < len(tokens) else ""
        if (size := _SIZE.fullmatch(token)) is not None:
            first, second = size.group(1), size.group(2)
            take(Mention("number", first, int(first), start, start + len(first)), "")
            take(Mention("number", second, int(second), end - len(second), end), "")
        elif (kept := _token(token, start, base, before, after)) is not None:
            take(*kept)
    found.sort(key=lambda item: item[0].start)
    found = _join_located_paths(query, found)
    user, cursor = [], 0
    for mention, _ in found:
        user.extend([query[cursor : mention.start], " "])
        cursor = mention.end
    user.append(query[cursor:])
    paths = sum(1 for m, _ in found if m.kind == "path")
    hints = [word for _, hint in found for word in hint.split()]
    hints += ["multiple"] if paths > 1 else ["single"] if paths == 1 else []
    items = tuple(m for m, _ in found)
    return Mentions(query=query, items=items, user_text="".join(user), hints=tuple(hints), base=base)


def goal_request(mentions: Mentions) -> Mentions | None:
    """The query as one `goal` mention when it asks to check something and names no path or URL."""
    match = _GOAL_REQUEST.match(mentions.query)
    if match is None or any(m.kind in ("url", "path", "glob") for m in mentions.items):
        return None
    start = match.end() - 1
    goal = Mention("goal", mentions.query[start:], mentions.query.strip(), start, len(mentions.query))
    return Mentions(mentions.query, (goal,), mentions.query[:start], ("goal",), mentions.base)


def takes_goal(tool: CatalogTool) -> bool:
    """A tool with a required string argument `goal`: a task in plain words."""
    spec = (tool.input_schema.get("properties") or {}).get("goal")
    return (
        "goal" in (tool.input_schema.get("required") or []) and isinstance(spec, dict) and role("goal", spec) == "goal"
    )


_LOCATED = frozenset({"in", "inside", "under", "within", "in the", "inside the", "under the"})


def _join_located_paths(query: str, found: list[tuple[Mention, str]]) -> list[tuple[Mention, str]]:
    """ "notes.txt in examples" is one path, examples/notes.txt, when that file exists there."""
    joined: list[tuple[Mention, str]] = []
    for mention, hint in found:
        if joined and mention.kind == "path" and isinstance(mention.value, str) and os.path.isdir(mention.value):
            first, _ = joined[-1]
            between = query[first.end : mention.start].strip().lower()
            between = re.sub(r"\s+(folder|directory|dir)$", "", between)
            candidate = os.path.join(mention.value, first.text) if first.kind == "path" else None
            if between in _LOCATED and candidate and not os.path.isabs(first.text) and os.path.exists(candidate):
                path = os.path.normpath(candidate)
                whole = Mention("path", query[first.start : mention.end], path, first.start, mention.end)
                joined[-1] = (whole, "path " + _path_hint(path))
                continue
        joined.append((mention, hint))
    return joined


def _quoted(text: str, start: int, end: int, base: str | None) -> tuple[Mention, str]:
    """A quoted URL, glob or path keeps its kind; any other quoted text is a text."""
    url = _url(text)
    if url is not None:
        return Mention("url", text, url, start, end), "url"
    if " " not in text.strip() and (found := _token(text.strip(), start, base, [], "")) is not None:
        mention, replacement = found
        if mention.kind in ("glob", "path"):
            return Mention(mention.kind, text, mention.value, start, end), replacement
    return Mention("quoted", text, text, start, end), ""


def _token(token: str, start: int, base: str | None, before: list[str], after: str) -> tuple[Mention, str] | None:
    end = start + len(token)
    if "*" in token or ("?" in token and len(token) > 1):
        return Mention("glob", token, token, start, end), "pattern"
    if _NUMBER.fullmatch(token):
        return Mention("number", token, float(token) if "." in token else int(token), start, end), ""
    if "@" in token or token.lower() in NOT_PATHS:
        return None
    resolved = _resolve(token, base)
    explicit = (
        token.startswith(("/", "./", "../", "~/"))
        or token in (".", "..", "~")
        or "/" in token
        or _FILE_NAME.fullmatch(token) is not None
        or (bool(before) and before[-1] in NAMING_WORDS)
    )
    if not explicit:
        placed = bool(PATH_PREPOSITIONS & set(before[-1:] + before[-2:-1] * (before[-1:] == ["the"])))
        placed = (placed and (after in STOP_WORDS or not after)) or after in FOLDER_WORDS
        if not placed or resolved is None or not os.path.exists(resolved) or token.lower() in PATH_PREPOSITIONS:
            return None
    return Mention("path", token, resolved, start, end), "path " + _path_hint(resolved or token)


def _url(text: str) -> str | None:
    """`text` as an absolute URL when it is one (bare hosts get http:// when local, else https://)."""
    if _SCHEME_URL.fullmatch(text):
        return text
    match = _BARE_URL.fullmatch(text)
    if match is None:
        return None
    host, port, path = match.group(1).split("/")[0].split(":")[0].lower(), match.group(2), match.group(3)
    local = host == "localhost" or _IP.fullmatch(host) is not None
    if local and not port and not path and host != "localhost":
        return None  # a bare 1.2.3.4 is more likely a version than a page
    if not local and not port and not host.startswith("www.") and host.rsplit(".", 1)[-1] not in WEB_TLDS:
        return None
    return ("http://" if local else "https://") + text


def _resolve(token: str, base: str | None) -> str | None:
    path = os.path.expanduser(token)
    if os.path.isabs(path):
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(base, path)) if base else None


def _path_hint(path: str) -> str:
    """The kind of a path as words of the search text: a folder, a text file, a media file."""
    if os.path.isdir(path):
        return "directory"
    extension = Path(path).suffix.lower().lstrip(".") or Path(path).name.lower().lstrip(".")
    if extension in TEXT_EXTENSIONS:
        return "file text"
    if extension in MEDIA_EXTENSIONS:
        return "file media image"
    return "file"


def role(name: str, spec: dict[str, Any]) -> Role:
    """What kind of value an argument takes, from its schema and name."""
    declared = spec.get("type")
    kinds = set(declared) if isinstance(declared, list) else {declared}
    items: dict[str, Any] = spec["items"] if isinstance(spec.get("items"), dict) else {}
    lowered = name.lower()
    if _enum(spec):
        return "enum"
    if "array" in kinds and _enum(items):
        return "enum_list"
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
    return "number" if kinds & {"number", "integer"} else "other"


def _enum(spec: dict[str, Any]) -> list[Any]:
    """The allowed values of `spec`, also inside `anyOf`/`oneOf` (as zod emits nullable enums)."""
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"])
    for key in ("anyOf", "oneOf"):
        for option in spec.get(key) or []:
            if isinstance(option, dict) and isinstance(option.get("enum"), list):
                return list(option["enum"])
    return []


@dataclass(frozen=True)
class Filling:
    arguments: dict[str, Any]
    missing: tuple[str, ...]
    """One phrase per required argument that could not be filled, naming it and why."""
    unplaced: tuple[Mention, ...]
    """Mentions of the query that no argument took: the plan would ignore what the user said."""
    placed: int
    """How many mentions went into required arguments."""

    @property
    def complete(self) -> bool:
        return not self.missing and not self.unplaced


def fill(tool: CatalogTool, mentions: Mentions) -> Filling:
    """The arguments of `tool` from the query's mentions (see the module docstring)."""
    properties = {n: s for n, s in (tool.input_schema.get("properties") or {}).items() if isinstance(s, dict)}
    required = [n for n in tool.input_schema.get("required") or [] if isinstance(n, str)]
    specs = {n: properties.get(n, {}) for n in required}
    roles = {n: role(n, s) for n, s in specs.items()}
    arguments: dict[str, Any] = {}
    missing: list[str] = []
    pool = list(mentions.items)
    for name in required:
        if roles[name] in ("enum", "enum_list"):
            values = _named_values(specs[name], roles[name], mentions, pool)
            if len(values) == 1 or (values and roles[name] == "enum_list"):
                arguments[name] = values if roles[name] == "enum_list" else values[0]
            elif values:
                missing.append(f"`{name}` (the task names several of its values: {', '.join(map(str, values))})")
        if name not in arguments and "default" in specs[name]:
            arguments[name] = specs[name]["default"]
    for wanted in ("url", "path", "pattern", "text", "number", "goal"):
        names = [n for n in required if roles[n] == wanted and n not in arguments]
        for kind in FOR_ROLE[wanted] if names else ():
            matching = [m for m in pool if m.kind == kind]
            if len(matching) == len(names):
                for name, mention in zip(names, matching, strict=True):
                    pool.remove(mention)
                    quoted_path = wanted == "path" and mention.kind == "quoted"
                    arguments[name] = _resolve(mention.text, mentions.base) if quoted_path else mention.value
                break
    for name in (n for n in required if roles[n] == "paths"):
        if paths := [m for m in pool if m.kind == "path"]:
            arguments[name] = [m.value for m in paths]
            pool = [m for m in pool if m.kind != "path"]
    placed = len(mentions.items) - len(pool)
    _fill_optional(properties, set(required), arguments, pool, mentions)
    for name in required:
        value = arguments.get(name)
        if name not in arguments:
            missing.append(_missing(name, specs[name], roles[name]))
        elif value is None or (isinstance(value, list) and None in value):
            missing.append(f"`{name}` (a path the context cannot resolve: send the working directory or the open file)")
            arguments.pop(name)
    return Filling(arguments=arguments, missing=tuple(missing), unplaced=tuple(pool), placed=placed)


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
        if role(name, spec) == "enum" and set(words(name)) <= query_words:
            values = _named_values(spec, "enum", mentions, pool)
            if len(values) == 1:
                arguments[name] = values[0]
    for mention in list(pool):
        near = set(words(mentions.query[: mention.start])[-WINDOW:] + words(mentions.query[mention.end :])[:WINDOW])
        scores: dict[str, int] = {}
        for name, spec in optional.items():
            if name in arguments or mention.kind not in FOR_ROLE.get(role(name, spec), ()):
                continue
            named = set(words(name))
            described = set(words(str(spec.get("description") or "")))
            overlap = len(near & described)
            if named <= near or overlap >= 2:
                scores[name] = overlap + (2 if named <= near else 0)
        best = max(scores.values(), default=0)
        winners = [n for n, s in scores.items() if s == best]
        if len(winners) == 1:
            arguments[winners[0]] = mention.value
            pool.remove(mention)


def _named_values(spec: dict[str, Any], kind: Role, mentions: Mentions, pool: list[Mention]) -> list[Any]:
    """Enum values the query names (quoted or not), in the order it names them; longer values match first."""
    options = _enum(spec) if kind == "enum" else _enum(spec.get("items") or {})
    query_words = _words_and_quotes(mentions)
    found: list[tuple[int, Any]] = []
    used = [False] * len(query_words)
    for value in sorted((v for v in options if isinstance(v, str)), key=lambda v: -len(words(v))):
        target = words(value)
        for i in range(len(query_words) - len(target) + 1) if target else ():
            if query_words[i : i + len(target)] == target and not any(used[i : i + len(target)]):
                used[i : i + len(target)] = [True] * len(target)
                found.append((i, value))
                break
    values = list(dict.fromkeys(v for _, v in sorted(found, key=lambda f: f[0])))
    for quoted in [m for m in pool if m.kind == "quoted" and words(m.text) and m.text in values]:
        pool.remove(quoted)
    return values


def _words_and_quotes(mentions: Mentions) -> list[str]:
    """The words of the query without its URLs, paths, patterns and numbers, but with quoted texts."""
    pieces, cursor = [], 0
    for mention in mentions.items:
        pieces.append(mentions.query[cursor : mention.start])
        pieces.append(f" {mention.text} " if mention.kind == "quoted" else " ")
        cursor = mention.end
    pieces.append(mentions.query[cursor:])
    return words("".join(pieces))


def _missing(name: str, spec: dict[str, Any], kind: Role) -> str:
    what = {
        "url": "a URL",
        "path": "a path",
        "paths": "one or more paths",
        "pattern": "a pattern (quote it)",
        "text": "a text (quote it)",
        "goal": 'a request like "check that ..." or a quoted text',
        "number": "a number",
        "enum": "one of " + ", ".join(map(str, _enum(spec))),
        "enum_list": "one or more of " + ", ".join(map(str, _enum(spec.get("items") or {}))),
    }.get(kind, "a value")
    text = str(spec.get("description") or "")
    described = f": {text if len(text) <= 80 else text[:80].rsplit(' ', 1)[0] + '...'}" if text else ""
    return f"`{name}` (needs {what}{described})"
