"""Which backend a resource URI belongs to, learnt from what the backends said.

A URI is passed to the IDE unchanged, so reading it needs the owner back. The table learns from three
sources, strongest first: a backend's `resources/list`, its `resources/templates/list` (the longest literal
prefix of a template wins), and a tool result that carried the URI (a `resource_link` or an embedded
resource: the backend that made it can read it). What a result carried counts only for the principal whose
call returned it, and never over a backend that lists the URI or whose template matches it: a hostile
backend's link cannot take another backend's URI, for its caller or anyone else (among backends that all
list a URI, the one whose result carried it for this principal wins). A URI none of them names goes to the
one backend that uses its scheme, if exactly one does (a scheme learnt from a link, again, only for that
principal). Everything is bounded: the oldest entries are forgotten first.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import mcp_types as types

MAX_ENTRIES = 20_000
MAX_PER_BACKEND = 1_000
"""Template prefixes and schemes kept per backend: a backend that lists more forgets its oldest first."""


class _Bounded(OrderedDict[str, list[str]]):
    """uri -> the backends that named it, most recent last; the least recently named URI goes first."""

    def add(self, key: str, backend: str) -> None:
        owners = [b for b in self.pop(key, []) if b != backend]
        self[key] = [*owners, backend]
        while len(self) > MAX_ENTRIES:
            self.popitem(last=False)


def _for(principal: str | None, key: str) -> str:
    """A key of what a result carried: the principal's own (None: stdio's one user)."""
    return f"{principal or ''}\n{key}"


class ResourceRoutes:
    def __init__(self) -> None:
        self._carried = _Bounded()
        """principal and uri (`_for`) -> the backends whose results carried it"""
        self._carried_schemes = _Bounded()
        """principal and scheme (`_for`) -> the backends whose results carried a URI of it"""
        self._listed = _Bounded()
        self._names: dict[str, str] = {}
        self._prefixes: dict[str, dict[str, str]] = {}
        """backend -> {template's literal prefix: the template}"""
        self._schemes: dict[str, dict[str, None]] = {}
        """backend -> its schemes, in the order last seen (an ordered set)"""

    def listed(self, backend: str, resources: Iterable[types.Resource]) -> None:
        for resource in resources:
            uri = str(resource.uri)
            self._listed.add(uri, backend)
            self._names[uri] = resource.name
            self._scheme(uri, backend)
        while len(self._names) > MAX_ENTRIES:
            del self._names[next(iter(self._names))]

    def templates(self, backend: str, templates: Iterable[types.ResourceTemplate]) -> None:
        known = self._prefixes.setdefault(backend, {})
        for template in templates:
            prefix = template.uri_template.split("{", 1)[0]
            known.pop(prefix, None)  # re-listed: now the most recent
            known[prefix] = template.uri_template
            self._scheme(template.uri_template, backend)
        while len(known) > MAX_PER_BACKEND:
            del known[next(iter(known))]

    def carried(self, backend: str, result: types.CallToolResult, principal: str | None = None) -> None:
        """The URIs a tool result links to or embeds: that backend can read them, for `principal` (whose call it
        was) only."""
        for block in result.content:
            if isinstance(block, types.ResourceLink):
                uri = str(block.uri)
            elif isinstance(block, types.EmbeddedResource):
                uri = str(block.resource.uri)
            else:
                continue
            self._carried.add(_for(principal, uri), backend)
            if scheme := _scheme_of(uri):
                self._carried_schemes.add(_for(principal, scheme), backend)

    def owner(self, uri: str, candidates: Sequence[str], principal: str | None = None) -> str | None:
        """The backend among `candidates` (those offering resources, in config order) that reads `uri` for
        `principal`."""
        carried = [b for b in reversed(self._carried.get(_for(principal, uri), [])) if b in candidates]
        listed = [b for b in reversed(self._listed.get(uri, [])) if b in candidates]
        if listed:
            return next((b for b in carried if b in listed), listed[0])
        if (template := self.template_owner(uri, candidates)) is not None:
            return template
        if carried:
            return carried[0]
        scheme = _scheme_of(uri)
        own = self._carried_schemes.get(_for(principal, scheme), []) if scheme else []
        by_scheme = [b for b in candidates if scheme in self._schemes.get(b, ()) or b in own]
        if len(by_scheme) == 1:
            return by_scheme[0]
        return candidates[0] if len(candidates) == 1 else None

    def template_owner(self, uri: str, candidates: Sequence[str]) -> str | None:
        """The backend whose template has the longest literal prefix of `uri` (also a template itself)."""
        best: tuple[int, str] | None = None
        for backend in candidates:
            for prefix, template in self._prefixes.get(backend, {}).items():
                if (uri.startswith(prefix) or uri == template) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), backend)
        return best[1] if best is not None else None

    def name(self, uri: str) -> str | None:
        """The name a backend listed the URI under, if one did."""
        return self._names.get(uri)

    def shared(self, uri: str) -> bool:
        """Whether two backends listed or carried the same URI (its listed name then says whose it is)."""
        return len(set(self._listed.get(uri, [])) | set(self._carried.get(uri, []))) > 1

    def _scheme(self, uri: str, backend: str) -> None:
        if scheme := _scheme_of(uri):
            known = self._schemes.setdefault(backend, {})
            known.pop(scheme, None)
            known[scheme] = None
            while len(known) > MAX_PER_BACKEND:
                del known[next(iter(known))]


_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*):")  # anchored: linear also where it is searched


def _scheme_of(uri: str) -> str:
    """RFC 3986's scheme, lower case ("" for none). Not `urlsplit`: it caches what it split, and a client's
    URIs may be megabytes long."""
    found = _SCHEME.match(uri)
    return found.group(1).lower() if found else ""
