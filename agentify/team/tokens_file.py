"""The tokens file of `server.auth` type `tokens`: one bearer token per person, stored as its sha256.

    {"tokens": [{"name": "alice", "sha256": "<hex sha256 of the token>", "scopes": ["..."], "groups": ["qa"]}]}

A token is shown once, by `agentify token add`, and never stored: whoever reads the file (a backup,
a config repository) cannot call the gateway with what is in it. Tokens start with `TOKEN_PREFIX`,
a shape the redactor masks wherever one is quoted by mistake.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN_PREFIX = "agt_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
_HEX = re.compile(r"[0-9a-f]{64}")
MAX_FILE_BYTES = 4 * 1024 * 1024


class TokensFileError(Exception):
    """The file cannot be read or holds something else than tokens; the message says where and what to do."""


@dataclass(frozen=True)
class Person:
    name: str
    scopes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise TokensFileError(
            f"{name[:80]!r} is not a token name: use 1-64 letters, digits and _ . @ + - (a person or a bot, "
            "as it should show in logs and traces)"
        )
    return name


def check_private(path: Path) -> None:
    """The gateway trusts the tokens file only when it is its own user's and no one else can write it: whoever
    can write it can let themselves in. Raises TokensFileError (a missing file passes: it holds no tokens)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TokensFileError(f"the tokens file {path} cannot be read: {exc.strerror}") from None
    if info.st_uid != os.geteuid():
        raise TokensFileError(
            f"the tokens file {path} belongs to user id {info.st_uid}, not to the user the gateway runs as "
            f"({os.geteuid()}): whoever owns it can let anyone in. Give it to this user (chown) or recreate it"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TokensFileError(
            f"the tokens file {path} can be written by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            f"anyone of them could add a token. Make it private: chmod 600 {path}"
        )


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The file's entries, checked; [] when it does not exist yet. Raises TokensFileError."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TokensFileError(f"the tokens file {path} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise TokensFileError(f"the tokens file {path} is over {MAX_FILE_BYTES} bytes: it holds no tokens file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokensFileError(f"the tokens file {path} is not JSON ({exc}); restore it or recreate it") from None
    entries = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise TokensFileError(f'the tokens file {path} must hold {{"tokens": [...]}}')
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"the tokens file {path}, tokens[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise TokensFileError(f'{where} must be {{"name", "sha256", "scopes"?, "groups"?}}')
        check_name(entry["name"])
        if not isinstance(entry.get("sha256"), str) or not _HEX.fullmatch(entry["sha256"]):
            raise TokensFileError(f"{where} ({entry['name']}): sha256 must be 64 lowercase hex digits")
        for key in ("scopes", "groups"):
            listed = entry.get(key, [])
            if not isinstance(listed, list) or not all(isinstance(s, str) and s for s in listed):
                raise TokensFileError(f"{where} ({entry['name']}): {key} must be a list of names")
        if entry["name"] in names:
            raise TokensFileError(f"{where}: the name {entry['name']!r} is there twice")
        names.add(entry["name"])
    return entries


def people_by_digest(entries: list[dict[str, Any]]) -> dict[str, Person]:
    return {e["sha256"]: Person(e["name"], tuple(e.get("scopes", [])), tuple(e.get("groups", []))) for e in entries}


def encode(entries: list[dict[str, Any]]) -> bytes:
    return (json.dumps({"tokens": entries}, indent=2) + "\n").encode()
