"""What a query says besides its words: the values the offline planner may put into arguments.

`analyse` finds the mentions of a task: quoted strings, URLs (a bare `localhost:3000/login`
becomes `http://localhost:3000/login`), paths (resolved against the working directory, else the
active document's folder; "this file" and "here" mean the active document and the working
directory, "the project" (or repo) the working directory too, "the parent folder" the one above
it; a bare word is a path when it follows "named"/"called", or when it exists and follows "in",
"of", "from"... or a file verb ("ls docs"), or precedes "folder"; a bare word said again in a path of
the task is that path), glob patterns, numbers (`1280x720` is two; "twenty" before what it counts, `COUNTED`,
is 20; a number inside a goal in plain words stays part of it), email addresses (a text), element refs (`e5`)
and key names where a key is named (`vocabulary.py`).
It also gives the terms to rank tools with: the user's own words, without the mentions (so
`arbigent/arbigent-project.yaml` does not read as a request for the arbigent tools), plus, at
`HINT_WEIGHT`, the kind of argument each mention fills ("url"; "path", "directory"; "path",
"file", "text"; "single" or "multiple" for the number of paths). A task that opens with "what"
or "which" is a question (`Mentions.asks`).

`goal_request` reads a request to check something ("check that ...", "verify whether ...", "make
sure ...") that names no path or URL as one mention, the whole query, for a tool whose required
`goal` argument takes a task in plain words (the arbigent runner's `run-arbigent-task`); the
planner asks for it only when such a tool exists.

`fill` (in `fill.py`) puts the mentions into a tool's arguments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from agentify.planner import TaskContext, TaskInput
from agentify.planner.offline.negation import exclusions
from agentify.planner.offline.vocabulary import COUNTED, NUMBER_WORDS, is_ref, key_name
from agentify.planner.prompt import document_path
from agentify.planner.words import STOP_WORDS, query_terms, words

Kind = Literal["url", "path", "quoted", "email", "glob", "number", "ref", "key", "goal"]

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
ASKING = frozenset({"what", "which"})
ASKED = ("list", "read")
MAX_DIGITS = 30  # a longer run of digits is no number an argument takes (and int() refuses 4,300 digits)
HINT_WEIGHT = 0.5  # a kind of argument is evidence, but less than a word the user chose
# "check (on the device / in the shop app) that ...": where, in one word or a second that names the device
_GOAL_REQUEST = re.compile(
    r"^\s*(?:please\s+)?(?:(?:check|verify|confirm|ensure|test)(?:\s+(?:on|in|with|using|at)\s+(?:(?:the|my|our|a)\s+)?"
    r"[\w-]+(?:\s+(?:app|device|phone|emulator|simulator))?)?\s+(?:that|whether|if)|make\s+sure(?:\s+that)?)\s+\S",
    re.IGNORECASE,
)

FILE_VERBS = frozenset({"ls", "cat", "tree", "open", "read", "list", "show", "view", "edit", "head", "tail"})

# A quote without its closing one ends at the next opening one: a run of `“` costs one pass, not one each.
_QUOTED = re.compile(r'"([^"\n]+)"|“([^“”\n]+)”|`([^`\n]+)`|(?<!\w)\'([^\'\n]+)\'(?!\w)')
_EMAIL = re.compile(r"(?<![\w.+/~\\-])\w[\w.+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.([A-Za-z]{2,})\b(?![:/@\\\w])")
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
# The working directory as a whole ("the project", "our repo") and its parent: places the words imply.
_PROJECT = re.compile(r"\b(?:the|this|our|my) (?:project|repo|repository|codebase)\b", re.IGNORECASE)
_PARENT = re.compile(r"\b(?:the )?parent (?:folder|directory|dir)\b", re.IGNORECASE)
_TOKEN = re.compile(r"\S+")
_NONE = re.compile(r"\b(no|zero)\s+[a-z]+", re.IGNORECASE)  # "no retries": said as a whole, the number is "no"
ECHO_SPAN = 60  # how far a path may follow the bare word it says again
_JOINS = re.compile(r",|;|\b(?:and|or|plus)\b", re.IGNORECASE)
_LETTERS = re.compile(r"[a-z]+")
# The look-behinds let a name (or a number) start only where a run of its characters starts: linear in search.
_FILE_NAME = re.compile(r"(?<![\w.@+-])(?:[\w@+-][\w.@+-]*)?\w\.[A-Za-z][A-Za-z0-9]{0,7}|\.[A-Za-z0-9][\w.-]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SIZE = re.compile(r"(?<!\d)(\d+)[x×](\d+)")
_FOLDER_WORD = re.compile(r"(?<!\s)\s+(folder|directory|dir)$")
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
    bare: bool = False
    """A plain word taken as a path only because a file or folder of that name exists ("in the arbigent
    project"): it may be the word of a tool's name ("list the arbigent scenarios") rather than a value."""
    inside: bool = False
    """A number said inside a goal in plain words: part of the goal, unless an argument is named next to it."""


@dataclass(frozen=True)
class Exclusion:
    """A part of the task that leaves something out ("except checkout", `negation.exclusions`), with the values
    said in it: none of it is the user's request, so its words and values are not the task's."""

    text: str
    start: int
    end: int
    values: tuple[Mention, ...]


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
    asks: bool = False
    """A question ("what files are in docs?", "which tabs are open?"): it asks to see something, so a tool
    named for listing or reading is what it names, and a destructive tool is never the answer."""
    left_out: tuple[Exclusion, ...] = ()
    """What the task excludes: a plan honours each, or there is none."""

    @property
    def values(self) -> tuple[Mention, ...]:
        """The mentions that are values of their own, not said `inside` a goal."""
        return tuple(m for m in self.items if not m.inside)

    def terms(self) -> dict[str, float]:
        """What tools are ranked by: the user's words (and synonyms), and the hints at `HINT_WEIGHT`."""
        terms = query_terms(self.user_text)
        for hint in words(" ".join(self.hints)):
            terms[hint] = max(terms.get(hint, 0.0), HINT_WEIGHT)
        return terms


def analyse(task: TaskInput, *, exclusions_apart: bool = False, choices: frozenset[str] = frozenset()) -> Mentions:
    """The mentions of `task`; `exclusions_apart`: what it excludes is set apart (`Mentions.left_out`), its words
    and values no part of the request (the offline planner's; a search keeps them, as words of the topic);
    `choices`: what the catalog's tools choose among, lowercased (`negation.exclusions`)."""
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

    def urls(pattern: re.Pattern[str]) -> None:
        for match in pattern.finditer(query):
            text = match.group(0).rstrip(".,;:!?)]}")
            end = match.start() + len(text)
            url = as_url(text)
            if url is not None and not any(taken[match.start() : end]):
                take(Mention("url", text, url, match.start(), end), "url")

    urls(_SCHEME_URL)  # before the email addresses: `https://user@host/`
    for match in _EMAIL.finditer(query):  # not a file name: `logo@2x.png`, `report@2024.pdf`
        if match.group(1).lower() not in TEXT_EXTENSIONS | MEDIA_EXTENSIONS and not any(
            taken[match.start() : match.end()]
        ):
            take(Mention("email", match.group(0), match.group(0), match.start(), match.end()), "email")
    urls(_BARE_URL)  # after them: `jane@company.com` is not the site company.com
    parent = os.path.normpath(os.path.join(base, os.pardir)) if base else None
    places = (
        (_DOCUMENT, document, "file"),
        (_DIRECTORY, base, "directory"),
        (_PROJECT, base, "directory"),
        (_PARENT, parent, "directory"),
    )
    for pattern, value, kind in places:
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
        if (size := _SIZE.fullmatch(token)) is not None and len(token) <= MAX_DIGITS:
            first, second = size.group(1), size.group(2)
            take(Mention("number", first, int(first), start, start + len(first)), "")
            take(Mention("number", second, int(second), end - len(second), end), "")
        elif is_ref(token):
            take(Mention("ref", token, token, start, end), "element target")
        elif (key := key_name(token, before, after)) is not None:
            take(Mention("key", token, key, start, end), "key")
        elif (kept := _token(token, start, base, before, after)) is not None:
            take(*kept)
    found.sort(key=lambda item: item[0].start)
    found = _join_located_paths(query, found)
    found = _without_echoes(query, found)
    spans = exclusions(query, [(m.start, m.end) for m, _ in found], choices) if exclusions_apart else []
    found, left_out = _set_apart(query, found, spans)
    user = _cut(query, sorted([(m.start, m.end) for m, _ in found] + spans), lambda start, end: " ")
    paths = sum(1 for m, _ in found if m.kind == "path")
    hints = [word for _, hint in found for word in hint.split()]
    hints += ["multiple"] if paths > 1 else ["single"] if paths == 1 else []
    items = tuple(m for m, _ in found)
    first = _LETTERS.search(query.lower())
    asks = first is not None and first.group(0) in ASKING
    return Mentions(query, items, user, tuple(hints), base, asks, left_out)


def _set_apart(
    query: str, found: list[tuple[Mention, str]], spans: list[tuple[int, int]]
) -> tuple[list[tuple[Mention, str]], tuple[Exclusion, ...]]:
    """The mentions outside `spans` (both sorted), and each span as an `Exclusion` with the mentions in it."""
    kept: list[tuple[Mention, str]] = []
    inside: list[list[Mention]] = [[] for _ in spans]
    i = 0
    for mention, hint in found:
        while i < len(spans) and spans[i][1] <= mention.start:
            i += 1
        if i < len(spans) and spans[i][0] <= mention.start:
            inside[i].append(mention)
        else:
            kept.append((mention, hint))
    return kept, tuple(Exclusion(query[s:e], s, e, tuple(m)) for (s, e), m in zip(spans, inside, strict=True))


def _cut(query: str, spans: list[tuple[int, int]], instead: Callable[[int, int], str]) -> str:
    """`query` with each of `spans` (sorted, not overlapping) replaced by `instead(start, end)`."""
    pieces, cursor = [], 0
    for start, end in spans:
        pieces.extend([query[cursor:start], instead(start, end)])
        cursor = end
    pieces.append(query[cursor:])
    return "".join(pieces)


def without_exclusions(mentions: Mentions) -> str:
    """The query without what it excludes and its values, but with its quoted texts: where choices are named."""
    quoted = {(m.start, m.end): m.text for m in mentions.values if m.kind == "quoted"}
    spans = sorted([(m.start, m.end) for m in mentions.values] + [(x.start, x.end) for x in mentions.left_out])
    return _cut(mentions.query, spans, lambda start, end: f" {quoted.get((start, end), '')} ")


_LOCATED = frozenset({"in", "inside", "under", "within", "in the", "inside the", "under the"})


def _join_located_paths(query: str, found: list[tuple[Mention, str]]) -> list[tuple[Mention, str]]:
    """ "notes.txt in examples" is one path, examples/notes.txt, when that file exists there."""
    joined: list[tuple[Mention, str]] = []
    for mention, hint in found:
        if joined and mention.kind == "path" and isinstance(mention.value, str) and os.path.isdir(mention.value):
            first, _ = joined[-1]
            between = query[first.end : mention.start].strip().lower()
            between = _FOLDER_WORD.sub("", between)
            candidate = os.path.join(mention.value, first.text) if first.kind == "path" else None
            if between in _LOCATED and candidate and not os.path.isabs(first.text) and os.path.exists(candidate):
                path = os.path.normpath(candidate)
                whole = Mention("path", query[first.start : mention.end], path, first.start, mention.end)
                joined[-1] = (whole, "path " + _path_hint(path))
                continue
        joined.append((mention, hint))
    return joined


def _without_echoes(query: str, found: list[tuple[Mention, str]]) -> list[tuple[Mention, str]]:
    """A bare word that is a part of a path the task gives next, within `ECHO_SPAN` characters and with no "and"
    or comma between, is that place said twice ("the arbigent config file arbigent/arbigent-config.yaml"): one
    value, not two, and the word stays one of the user's. "the tree of arbigent and arbigent/arbigent-result"
    names two."""
    kept: list[tuple[Mention, str]] = []
    later: Mention | None = None  # the next path the task gives outright, walking back from its end
    for mention, hint in reversed(found):
        echo = (
            mention.bare
            and later is not None
            and later.start - mention.end <= ECHO_SPAN
            and not _JOINS.search(query, mention.end, later.start)
            and mention.text in re.split(r"[/\\]", later.text)
        )
        if not echo:
            kept.append((mention, hint))
        if mention.kind == "path" and not mention.bare:
            later = mention
    return kept[::-1]


def _in_words(token: str, before: list[str]) -> int | None:
    """The number `token` ends, with the word before it: "twenty five" is 25, "two hundred" 200; None for words
    that make no number together ("five twenty")."""
    value, previous = NUMBER_WORDS[token], NUMBER_WORDS.get(before[-1]) if before else None
    if previous is None:
        return value
    if previous >= 20 and previous % 10 == 0 and value < 10:
        return previous + value
    return previous * value if value == 100 and previous < 10 else None


def _quoted(text: str, start: int, end: int, base: str | None) -> tuple[Mention, str]:
    """A quoted URL, glob or path keeps its kind; any other quoted text is a text."""
    url = as_url(text)
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
    if _NUMBER.fullmatch(token) and len(token) <= MAX_DIGITS:
        return Mention("number", token, float(token) if "." in token else int(token), start, end), ""
    if token.lower() in NUMBER_WORDS and after in COUNTED:  # "five twenty lines": a value no argument takes
        value = _in_words(token.lower(), before)
        return Mention("number" if value is not None else "quoted", token, value or token, start, end), ""
    if "@" in token or token.lower() in NOT_PATHS:
        return None
    resolved = resolve_path(token, base)
    explicit = (
        token.startswith(("/", "./", "../", "~/"))
        or token in (".", "..", "~")
        or "/" in token
        or _FILE_NAME.fullmatch(token) is not None
        or (bool(before) and before[-1] in NAMING_WORDS)
    )
    if not explicit:
        # An existing name where a path goes: after "in"/"of"... (then before a filler word, or a folder
        # name anywhere), before "folder", or right after a file verb ("ls arbigent").
        placed = bool(PATH_PREPOSITIONS & set(before[-1:] + before[-2:-1] * (before[-1:] == ["the"])))
        folder = resolved is not None and os.path.isdir(resolved)
        placed = (placed and (after in STOP_WORDS or not after or folder)) or after in FOLDER_WORDS
        placed = placed or (before[-1:] != [] and before[-1] in FILE_VERBS)
        if not placed or resolved is None or not os.path.exists(resolved) or token.lower() in PATH_PREPOSITIONS:
            return None
    return Mention("path", token, resolved, start, end, bare=not explicit), "path " + _path_hint(resolved or token)


def as_url(text: str) -> str | None:
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


def resolve_path(token: str, base: str | None) -> str | None:
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


def goal_request(mentions: Mentions) -> Mentions | None:
    """The query as one `goal` mention when it asks to check something and names no path or URL."""
    match = _GOAL_REQUEST.match(mentions.query)
    if match is None or any(m.kind in ("url", "path", "glob") for m in mentions.items):
        return None
    start = match.end() - 1
    goal = Mention("goal", mentions.query[start:], mentions.query.strip(), start, len(mentions.query))
    numbers = tuple(replace(m, inside=True) for m in mentions.items if m.kind == "number")
    # "no retries" is a number too, when an argument is named next to it ("make sure ..., no retries": `maxRetry`)
    zeros = _NONE.finditer(mentions.query, start)
    numbers += tuple(Mention("number", m.group(0), 0, m.start(1), m.end(1), inside=True) for m in zeros)
    return Mentions(mentions.query, (goal, *numbers), mentions.query[:start], ("goal",), mentions.base)
