"""Reading YAML files the runner does not control (project, config, settings, result.yml) safely.

- Only regular files are read, opened without blocking: a FIFO or a device is refused at once
  instead of hanging start-up.
- A file over a size limit is refused before it is read, and reading stops at the limit.
- Aliases are checked before anything is built: a document whose aliases expand beyond about
  twice the file's own size plus `ALIAS_ALLOWANCE` is refused (a 700-byte "billion laughs" file
  would otherwise grow to gigabytes wherever it is walked or printed). Recursive aliases are refused.
- Nesting is counted on the parser's events before anything is composed: a document nested deeper
  than `MAX_DEPTH` is refused. Composing is recursive (in C with libyaml), and 80 kB of `[` took the
  runner down with SIGSEGV where libyaml sets no limit of its own.
Every refusal is one line naming the file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentify._common import files

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Project, config and settings files: far above any real one (a project of 1,000 scenarios is ~200 kB)."""
ALIAS_ALLOWANCE = 1_000_000
"""Characters plus nodes that aliases may add beyond twice the file's size."""
MAX_DEPTH = 100
"""Nested sequences and mappings; a real project or settings file is under 10 deep."""
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class YamlFileError(Exception):
    """The file cannot be read safely; the message is one line naming it."""


@dataclass(frozen=True)
class YamlDocument:
    text: str
    data: Any
    error: yaml.YAMLError | None
    """Set when the text is not valid YAML (then `data` is None)."""


def read_yaml_file(path: Path, *, what: str, limit: int = MAX_FILE_BYTES) -> YamlDocument:
    """Reads and parses `path`; `what` names it in messages ("project file").

    Raises:
        YamlFileError: missing, not a regular file, over `limit`, not UTF-8, unreadable, or aliases
            that expand too far.
    """
    text = read_text_file(path, what=what, limit=limit)
    try:
        return YamlDocument(text, parse_yaml(text, f"{what} {path}"), None)
    except yaml.YAMLError as exc:
        return YamlDocument(text, None, exc)


def read_text_file(path: Path, *, what: str, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes.

    Raises:
        YamlFileError: as `read_yaml_file`.
    """
    try:
        fd = os.open(path, os.O_RDONLY | files.NONBLOCK | files.CLOEXEC)
    except FileNotFoundError:
        raise YamlFileError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise YamlFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise YamlFileError(f"{what} is a directory, not a file: {path}")
        if not stat.S_ISREG(info.st_mode):
            kind = _file_type(info.st_mode)
            raise YamlFileError(f"{what} {path} is not a regular file ({kind}); refusing to read it")
        if info.st_size > limit:
            raise YamlFileError(f"{what} {path} is {info.st_size:,} bytes, over the limit of {limit:,}")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise YamlFileError(f"{what} {path} grew over the limit of {limit:,} bytes while it was read")
    except OSError as exc:
        raise YamlFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def parse_yaml(text: str, source: str) -> Any:
    """`yaml.safe_load(text)`, refusing aliases that expand too far before building anything.

    Raises:
        yaml.YAMLError: not valid YAML.
        YamlFileError: nested deeper than MAX_DEPTH, aliases that expand beyond the limit, or recursive
            ones; names `source`.
    """
    _check_depth(text, source)
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, 2 * len(text) + ALIAS_ALLOWANCE, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_depth(text: str, source: str) -> None:
    """Counts nesting on the event stream, which the parser makes without recursion, stopping at the limit."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, _OPENS):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlFileError(f"{source}: nested more than {MAX_DEPTH} levels deep; refusing to load it")
        elif isinstance(event, _CLOSES):
            depth -= 1


def _check_expansion(root: yaml.Node, limit: int, source: str) -> None:
    """The size the document would have with every alias written out: nodes plus scalar characters.

    Each distinct node is visited once (aliases share node objects), so this is linear in the file.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            open_nodes.discard(key)
            size = 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else sum(sizes[id(c)] for c in children))
            if size > limit:
                raise YamlFileError(
                    f"{source}: its aliases expand to more than {limit:,} characters (a 'billion laughs' file?); "
                    "refusing to load it"
                )
            sizes[key] = size
        elif key in open_nodes:
            raise YamlFileError(f"{source}: an alias refers to a node that contains it; refusing to load it")
        elif key not in sizes:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _file_type(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"
