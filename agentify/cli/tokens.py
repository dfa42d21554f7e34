"""`agentify token add|remove|list`: the people of `server.auth` type `tokens` (team/tokens_file.py).

`add` prints the new token once, on stdout (so `T=$(agentify token add alice)` works), and stores
only its sha256. The file is rewritten whole (a new file renamed over the old one, mode 0600) under
a lock beside it, so two commands at once lose nothing and a serving gateway never reads half a file:
it picks the change up on its next request.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from agentify._common import files
from agentify._common.locking import try_lock
from agentify.cli.errors import EXIT_OK, UsageError
from agentify.cli.output import note, say
from agentify.cli.vault import forget_upstream
from agentify.config import load_sources
from agentify.config.server import TokensAuth
from agentify.team.tokens_file import TokensFileError, check_name, digest, encode, new_token, read_entries

LOCK_SECONDS = 5.0


def token_command(args: argparse.Namespace) -> int:
    """Raises UsageError (exit 2): no file to use, a bad or taken name, an unknown name, a broken file."""
    path = _tokens_file(args)
    try:
        if args.action == "list":
            for entry in read_entries(path):
                scopes, groups = (", ".join(entry.get(key, [])) for key in ("scopes", "groups"))
                listed = (f" (scopes: {scopes})" if scopes else "") + (f" (groups: {groups})" if groups else "")
                say(entry["name"] + listed)
            return EXIT_OK
        with _locked(path):
            entries = read_entries(path)
            names = [entry["name"] for entry in entries]
            name = check_name(args.name)
            if args.action == "remove":
                if name not in names:
                    raise UsageError(f"{name!r} has no token in {path} (it has: {', '.join(names) or 'none'})")
                _write(path, [entry for entry in entries if entry["name"] != name])
                note(f"agentify token remove: removed {name} from {path}; their token stops working")
                forget_upstream(args.config, name, "agentify token remove")
                return EXIT_OK
            if name in names:
                raise UsageError(
                    f"{name!r} already has a token in {path}: to give them a new one, run "
                    f"'agentify token remove {name}' first"
                )
            token = new_token()
            entry = {"name": name, "sha256": digest(token)} | ({"scopes": args.scope} if args.scope else {})
            entry |= {"groups": [check_name(group) for group in args.group]} if args.group else {}
            _write(path, [*entries, entry])
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    say(token)
    note(
        f"agentify token add: added {name} to {path}. Give them the token above now: it is not stored and cannot be "
        "shown again. Running gateways accept it from their next request."
    )
    return EXIT_OK


def _tokens_file(args: argparse.Namespace) -> Path:
    if args.file:
        return Path(args.file).expanduser().resolve()
    config = load_sources(args.config, {}).resolve()
    if isinstance(config.server.auth, TokensAuth):
        return Path(config.server.auth.file)
    raise UsageError(
        'which tokens file? Give --file F, or set server.auth to {"type": "tokens", "file": F} in the config '
        "(--config or AGENTIFY_CONFIG)"
    )


class _locked:
    """An exclusive lock on `<file>.lock`, waited for at most LOCK_SECONDS."""

    def __init__(self, path: Path) -> None:
        self._path = path.with_name(path.name + ".lock")
        self._fd = -1

    def __enter__(self) -> None:
        try:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | files.CLOEXEC | files.NOFOLLOW, 0o600)
        except OSError as exc:
            raise UsageError(f"cannot lock {self._path}: {exc.strerror}") from None
        deadline = time.monotonic() + LOCK_SECONDS
        while not try_lock(self._fd):
            if time.monotonic() > deadline:
                os.close(self._fd)
                raise UsageError(f"another 'agentify token' command holds {self._path}; try again when it is done")
            time.sleep(0.05)

    def __exit__(self, *_: object) -> None:
        os.close(self._fd)


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | files.CLOEXEC | files.NOFOLLOW
    try:
        with os.fdopen(os.open(temporary, flags, 0o600), "wb") as handle:
            handle.write(encode(entries))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
