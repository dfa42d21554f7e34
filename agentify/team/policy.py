"""`server.access.policyFile`: Cedar policies (cedarpy) for what patterns cannot say, such as a condition on
a call's arguments.

The entities a policy names:

    Principal::"alice"       attrs: name, groups (set of strings), scopes; in each Group::"<group>"
    Backend::"filesystem"
    Tool::"filesystem__write_file"      (as the gateway names it) in its Backend; attrs: name, backend
    Resource::"<uri or uri template>"   in its Backend
    Prompt::"<backend>__<prompt>"       in its Backend
    Action::"call" | "read" | "prompt" | "complete"

and `context`: `arguments` (a call's or a prompt's), `uri` (a read), `argument` (`{name, value}` of a
completion). JSON that Cedar has no value for is carried as it can be: a null is left out, a number
that is not a 64-bit integer becomes its text.

The file is parsed policy by policy, so an error names its line; each policy is known by the line it
starts on (`policy.cedar line 7`), which is what a refusal and the log name. A forbid that cannot be
evaluated (it reads an argument the call did not send, say) forbids: a policy meant to refuse is never
skipped by leaving something out. What a principal is shown is decided without the call's context:
a permit whose conditions read `context` may apply, a forbid whose conditions read it may not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from agentify.team.principal import Who

ACTIONS = ("call", "read", "prompt", "complete")
ENTITY_TYPES = ("Principal", "Group", "Backend", "Tool", "Resource", "Prompt", "Action")
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_CACHED = 50_000
_I64 = 2**63
_ERRORED = re.compile(r"error while evaluating policy `([^`]+)`")


class PolicyError(Exception):
    """The policy file cannot be used; the message names the file, the line and what is wrong."""


@dataclass(frozen=True)
class Target:
    """What a principal asks to use: `kind` is the entity type (Tool, Resource, Prompt), `id` its name as the
    gateway shows it, `name` the backend's own name for it."""

    action: str
    kind: str
    id: str
    backend: str
    name: str


@dataclass(frozen=True)
class Verdict:
    permitted: bool
    """A permit applied."""
    forbidden_by: str | None = None
    """The forbid that applied (or could not be evaluated), as `<file name> line N`; None when none did."""


@dataclass(frozen=True)
class _Statement:
    text: str
    first_line: int  # the line of `text`'s first character
    line: int  # the line the policy starts on (its first word)


class Policy:
    """The parsed file; immutable. `load` reads it; `decide` answers one request."""

    def __init__(self, path: Path, estimates: dict[str, dict[str, Any]], stamp: tuple[int, int, int]) -> None:
        self.path = path
        self.stamp = stamp
        self._full = cedarpy.PolicySet.from_json_str(_policy_set_json(estimates))
        shown = {pid: est for pid, est in ((p, _unknown_context(e)) for p, e in estimates.items()) if est is not None}
        self._shown = cedarpy.PolicySet.from_json_str(_policy_set_json(shown))
        scopes = {pid: est | {"conditions": []} for pid, est in estimates.items()}
        self._scopes = cedarpy.PolicySet.from_json_str(_policy_set_json(scopes))
        self._relevant: dict[tuple[Who, Target], bool] = {}
        self._forbids = {pid for pid, est in estimates.items() if est["effect"] == "forbid"}
        self.count = len(estimates)

    @classmethod
    def load(cls, path: Path) -> Policy:
        """Raises PolicyError: unreadable, too big, not Cedar, or naming what the gateway has not."""
        try:
            with path.open("rb") as handle:
                stamp = _stamp(path)
                raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise PolicyError(f"the policy file {path} cannot be read: {exc.strerror}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise PolicyError(f"the policy file {path} is over {MAX_FILE_BYTES} bytes")
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PolicyError(f"the policy file {path} is not UTF-8 (byte {exc.start})") from None
        estimates: dict[str, dict[str, Any]] = {}
        for statement in _statements(source):
            where = f"{path} line {statement.line}"
            try:
                parsed = json.loads(cedarpy.policies_to_json_str(statement.text))
            except ValueError as exc:
                line = _error_line(statement, str(exc))
                raise PolicyError(f"{path} line {line}: {exc} (Cedar policy syntax: see docs/team.md)") from None
            if parsed.get("templates"):
                raise PolicyError(f"{where}: a template (?principal, ?resource) is not supported; name them")
            for est in parsed["staticPolicies"].values():
                _check_names(est, where)
                known = f"{path.name} line {statement.line}"  # what a refusal names: no server path
                key = known if known not in estimates else f"{known} ({sum(k.startswith(known) for k in estimates)})"
                estimates[key] = est
        try:
            return cls(path, estimates, stamp)
        except ValueError as exc:  # parsed one by one, so this is not expected; still no crash
            raise PolicyError(f"the policy file {path}: {exc}") from None

    def decide(self, who: Who, target: Target, context: Mapping[str, Any] | None) -> Verdict:
        """`context` None: whether `who` may be shown `target` (see the module docstring)."""
        if not self._applies(who, target):
            return Verdict(False)
        return self._decide(who, target, context)

    def _applies(self, who: Who, target: Target) -> bool:
        """Whether the scope (principal, action, resource) of any policy takes in this request: Cedar is asked
        about the arguments of a call only then (a call to a tool no policy names costs no evaluation)."""
        key = (who, target)
        applies = self._relevant.get(key)
        if applies is None:
            if len(self._relevant) >= MAX_CACHED:
                self._relevant.clear()
            request = _request(who, target, {})
            result = cedarpy.is_authorized(request, self._scopes, _entities(who, target))
            applies = self._relevant[key] = bool(result.diagnostics.reasons)
        return applies

    def _decide(self, who: Who, target: Target, context: Mapping[str, Any] | None) -> Verdict:
        request = _request(who, target, _cedar_value(dict(context), 0) if context is not None else {})
        policies = self._full if context is not None else self._shown
        result = cedarpy.is_authorized(request, policies, _entities(who, target))
        errored = [m.group(1) for m in map(_ERRORED.search, result.diagnostics.errors) if m]
        forbids = [p for p in (*result.diagnostics.reasons, *errored) if p in self._forbids]
        if forbids:
            return Verdict(False, forbids[0])
        return Verdict(result.allowed)


def _request(who: Who, target: Target, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "principal": {"type": "Principal", "id": who.name},
        "action": {"type": "Action", "id": target.action},
        "resource": {"type": target.kind, "id": target.id},
        "context": context,
    }


def stamp_of(path: Path) -> tuple[int, int, int] | None:
    """What tells that the file changed (time, size, inode); None when it is gone."""
    try:
        return _stamp(path)
    except OSError:
        return None


def _stamp(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size, info.st_ino


def _entities(who: Who, target: Target) -> list[dict[str, Any]]:
    backend = {"type": "Backend", "id": target.backend}
    groups = sorted(who.groups)
    return [
        {
            "uid": {"type": "Principal", "id": who.name},
            "attrs": {"name": who.name, "groups": groups, "scopes": sorted(who.scopes)},
            "parents": [{"type": "Group", "id": group} for group in groups],
        },
        *({"uid": {"type": "Group", "id": group}, "attrs": {}, "parents": []} for group in groups),
        {"uid": backend, "attrs": {}, "parents": []},
        {
            "uid": {"type": target.kind, "id": target.id},
            "attrs": {"name": target.name, "backend": target.backend},
            "parents": [backend],
        },
    ]


def _cedar_value(value: Any, depth: int) -> Any:
    """JSON as a Cedar value (see the module docstring); None where Cedar has none."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_I64 <= value < _I64 else str(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() and -_I64 <= value < _I64 else repr(value)
    if depth >= MAX_DEPTH:
        return json.dumps(value)[:10_000]
    if isinstance(value, list):
        return [v for v in (_cedar_value(item, depth + 1) for item in value) if v is not None]
    if isinstance(value, dict):
        # `__entity`, `__extn` and `__expr` would make a caller's argument an entity or an extension value.
        pairs = ((str(k), _cedar_value(v, depth + 1)) for k, v in value.items() if not str(k).startswith("__"))
        return {k: v for k, v in pairs if v is not None}
    return None


def _unknown_context(est: dict[str, Any]) -> dict[str, Any] | None:
    """The policy as it applies when the call's context is unknown (listing), or None when it may not apply."""
    reads = [_reads_context(condition["body"]) for condition in est.get("conditions", [])]
    if not any(reads):
        return est
    if est["effect"] == "forbid":
        return None
    kept = [c for c, read in zip(est["conditions"], reads, strict=True) if not read]
    return est | {"conditions": kept}


def _reads_context(node: Any) -> bool:
    if isinstance(node, dict):
        return node.get("Var") == "context" or any(_reads_context(v) for v in node.values())
    if isinstance(node, list):
        return any(_reads_context(v) for v in node)
    return False


def _check_names(est: dict[str, Any], where: str) -> None:
    """Raises PolicyError for an entity type or action the gateway never uses (a typo would match nothing)."""
    for kind, name in _named(est):
        if kind not in ENTITY_TYPES:
            raise PolicyError(f"{where}: there is no entity type {kind!r}; use {', '.join(ENTITY_TYPES)}")
        if kind == "Action" and name is not None and name not in ACTIONS:
            actions = ", ".join(f'Action::"{a}"' for a in ACTIONS)
            raise PolicyError(f"{where}: there is no action {name!r}; use {actions}")


def _named(node: Any) -> Iterator[tuple[str, str | None]]:
    if isinstance(node, list):
        for item in node:
            yield from _named(item)
    elif isinstance(node, dict):
        if isinstance(node.get("type"), str) and isinstance(node.get("id"), str):
            yield node["type"], node["id"]
        if isinstance(node.get("entity_type"), str):
            yield node["entity_type"], None
        for value in node.values():
            yield from _named(value)


def _statements(source: str) -> Iterator[_Statement]:
    """The policies of `source`, each up to its `;` (outside strings and comments), with their lines."""
    start, first_line, line, content_line = 0, 1, 1, 0
    index, size = 0, len(source)
    while index < size:
        char = source[index]
        if char == "\n":
            line += 1
        elif source.startswith("//", index):
            end = source.find("\n", index)
            index = size if end < 0 else end
            continue
        elif char == '"':
            content_line = content_line or line
            index += 1
            while index < size and source[index] != '"':
                if source[index] == "\n":
                    line += 1
                index += 2 if source[index] == "\\" else 1
        elif char == ";":
            yield _Statement(source[start : index + 1], first_line, content_line or line)
            start, first_line, content_line = index + 1, line, 0
        elif not char.isspace():
            content_line = content_line or line
        index += 1
    if content_line:  # text after the last `;`: parsed, so its error says what is missing
        yield _Statement(source[start:], first_line, content_line)


def _error_line(statement: _Statement, message: str) -> int:
    """The first line by which the statement's error shows (cedarpy's messages carry no position)."""
    lines: Sequence[str] = statement.text.split("\n")
    for count in range(1, len(lines) + 1):
        prefix = "\n".join(lines[:count])
        if prefix.strip() and any(_parse_error(text) == message for text in (prefix, prefix + ";")):
            return statement.first_line + count - 1
    return statement.line


def _parse_error(text: str) -> str | None:
    try:
        cedarpy.policies_to_json_str(text)
    except ValueError as exc:
        return str(exc)
    return None


def _policy_set_json(estimates: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"templates": {}, "staticPolicies": estimates, "templateLinks": []})
