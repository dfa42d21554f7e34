"""The forms a resource URI takes when it is compared with a filter's patterns.

A backend reads `SECRET://x`, `file:///./etc/passwd`, `file:///srv/../etc/passwd` and `file:///%65tc/passwd`
as the URIs a deny names, so a filter compares URIs normalised (RFC 3986 section 6): scheme and host in lower
case, dot segments removed, percent-encoded unreserved characters decoded. Some backends also decode every
escape (`%2F`, `%2e%2e`, twice-encoded ones) or read `\\` and `//` in a path as `/`; `forms` gives that
reading too, so a deny holds when any form matches it, and an allow only when every form does.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

_UNRESERVED_ESCAPE = re.compile(r"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DEde]|5[Ff]|7[Ee])")
MAX_DECODES = 5
"""How many rounds of percent-decoding the decoded form undoes (a twice-encoded `%252e` is two)."""


def normalized(uri: str) -> str:
    """`uri` in RFC 3986 normal form: scheme and host lower case, unreserved escapes decoded, dot segments
    removed. Text that is no URI is returned as it came."""
    unescaped = _UNRESERVED_ESCAPE.sub(lambda m: unquote(m.group(0)), uri)
    try:
        parts = urlsplit(unescaped)
    except ValueError:
        return unescaped
    return _joined(parts, _without_dot_segments(parts.path))


def forms(uri: str) -> tuple[str, ...]:
    """The normal form, and the form with every escape decoded (up to `MAX_DECODES` rounds), `\\` read as `/`
    and repeated slashes collapsed, dot segments removed again."""
    decoded = uri
    for _ in range(MAX_DECODES):
        once = unquote(decoded)
        if once == decoded:
            break
        decoded = once
    decoded = decoded.replace("\\", "/")
    try:
        parts = urlsplit(decoded)
    except ValueError:
        return (normalized(uri), decoded)
    path = re.sub(r"/{2,}", "/", parts.path)
    return (normalized(uri), _joined(parts, _without_dot_segments(path)))


def _joined(parts: SplitResult, path: str) -> str:
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo}@{host.lower()}"
    else:
        netloc = netloc.lower()
    return urlunsplit((parts.scheme.lower(), netloc, path, parts.query, parts.fragment))


def _without_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    absolute = path.startswith("/")
    for index, segment in enumerate(segments[1:] if absolute else segments):
        last = index == len(segments) - (2 if absolute else 1)
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    return ("/" if absolute else "") + "/".join(output)
