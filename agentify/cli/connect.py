"""`agentify connect IDE`: moves an IDE's MCP servers into agentify's config and leaves the IDE one
entry, agentify; `--dry-run` shows the change, `--undo` puts both files back byte for byte."""

from __future__ import annotations

import argparse
import difflib
import os
import time
from pathlib import Path

from agentify.cli.errors import EXIT_OK, UsageError
from agentify.cli.output import say
from agentify.connect import ConnectError, files
from agentify.connect.ides import IDES, Ide
from agentify.connect.launch import installed_command
from agentify.connect.move import Connection, plan
from agentify.security.redact import Redactor


def _config_file(args: argparse.Namespace, ide: Ide, project: Path | None) -> Path:
    """`--config`, else `$AGENTIFY_CONFIG`, else the IDE's own config (`Ide.config`).

    Raises:
        UsageError: another IDE's connection already uses that config (its servers would reach this IDE)."""
    chosen = args.config or os.environ.get("AGENTIFY_CONFIG")
    path = Path(chosen).expanduser().resolve() if chosen else ide.config(project)
    ide_file = str(ide.file(project))
    for other in files.all_records():
        if other.ide_file.path != ide_file and Path(other.config_file.path) == path:
            raise UsageError(
                f"{path} already holds the servers of {other.ide} ({other.ide_file.path}); each IDE gets its own "
                f"config, so that one IDE's servers never reach another's gateway: leave out --config (and "
                f"AGENTIFY_CONFIG) for {ide.name}'s own, or name another file"
            )
    return path


def connect(args: argparse.Namespace) -> int:
    project = Path(args.project).expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        raise UsageError(f"--project {args.project}: no such folder")
    try:
        if args.undo:
            return _undo(args, project)
        if args.ide is None:
            raise UsageError(f"name the IDE: agentify connect {{{','.join(IDES)}}} (or --undo)")
        ide = IDES[args.ide]
        ide_file = ide.file(project)
        config_file = _config_file(args, ide, project)
        earlier = files.load(ide_file)
        if earlier is not None:
            raise UsageError(
                f"{ide_file} is already connected (backup from {time.ctime(earlier.at)}); "
                f"run `agentify connect --undo {ide.name}` first, then connect again"
            )
        command = installed_command()
        change = plan(ide, ide_file, config_file, command, files.read(ide_file), files.read(config_file))
        if args.dry_run:
            say(_diff(change))
            say("(dry run: nothing was written)")
            return EXIT_OK
        _apply(change)
    except ConnectError as exc:
        raise UsageError(str(exc)) from None
    say("\n".join(_summary(change)))
    if Path(command[0]).name in ("uvx", "uvx.exe"):
        say(
            f"{change.ide.title} starts agentify with `uvx --from '{command[2]}' agentify`, not the path this one runs "
            "from: that is in uv's cache, which `uv cache clean` deletes"
        )
    return EXIT_OK


def _apply(change: Connection) -> None:
    """Backup first, then agentify's config, then the IDE's file: a failure midway leaves the IDE
    starting its servers as before."""
    record = files.Record(
        change.ide.name,
        files.Kept(str(change.ide_file), files.mode_of(change.ide_file), files.digest(change.ide_after)),
        files.Kept(str(change.config_file), files.mode_of(change.config_file), files.digest(change.config_after)),
        time.time(),
    )
    files.keep(record, change.ide_before, change.config_before)
    files.write_atomic(change.config_file, change.config_after)
    files.write_atomic(change.ide_file, change.ide_after, record.ide_file.mode or files.SECRET_MODE)


def _diff(change: Connection) -> str:
    redactor = Redactor(change.secrets)
    parts = []
    for path, before, after in (
        (change.config_file, change.config_before, change.config_after),
        (change.ide_file, change.ide_before, change.ide_after),
    ):
        old = (before or b"").decode("utf-8-sig", "replace").splitlines(keepends=True)
        new = after.decode().splitlines(keepends=True)
        label = str(path) if before is not None else "/dev/null"
        parts.append("".join(difflib.unified_diff(old, new, label, str(path))))
    return redactor.text("".join(parts)).rstrip("\n")


def _summary(change: Connection) -> list[str]:
    ide, lines = change.ide, []
    for name in change.moved:
        target = change.renamed.get(name)
        where = f" as {target!r} ({name!r} was taken by another server)" if target else ""
        lines.append(f"moved {name!r}{where}")
    lines += [f"kept {name!r}: agentify's config already has it" for name in change.already]
    lines.append(f"agentify's config: {change.config_file}")
    lines.append(f"{ide.title}: {change.ide_file} now starts only agentify")
    lines.append(f"undo with `agentify connect --undo {ide.name}`; restart {ide.title}'s MCP servers to use agentify")
    return lines


def _undo(args: argparse.Namespace, project: Path | None) -> int:
    if args.ide is not None:
        ide_file = IDES[args.ide].file(project)
        record = files.load(ide_file)
        if record is None:
            raise UsageError(f"{ide_file} was not connected by agentify connect: nothing to undo")
    else:
        records = files.all_records()
        if len(records) != 1:
            known = ", ".join(f"{r.ide} ({r.ide_file.path})" for r in records) or "none"
            raise UsageError(f"name the IDE to undo: agentify connect --undo IDE [--project DIR] (connected: {known})")
        record = records[0]
    say("\n".join(files.restore(record)))
    return EXIT_OK
