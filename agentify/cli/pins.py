"""`agentify pins list|approve`: the pinned tool definitions of the config's gateway (config `pinning`).

They read and write the store the gateway uses (`pins.json` in the state folder, or Redis with
`server.redis`), so a running gateway picks an approval up without a restart. `approve` prints the
difference between the pinned definition and the waiting one before it accepts it.
"""

from __future__ import annotations

import argparse
import json
import time

from agentify.cli.errors import EXIT_OK, UsageError
from agentify.cli.output import note, say
from agentify.config import load_sources
from agentify.pinning import PinStoreError, open_store
from agentify.pinning.digest import difference
from agentify.pinning.records import BackendPins


def pins_command(args: argparse.Namespace) -> int:
    """Raises UsageError (exit 2): an unknown backend or tool, nothing waiting, a store that cannot be used."""
    config = load_sources(args.config, {}).resolve()
    store = open_store(config)
    try:
        snapshot = store.load()
        if args.action == "list":
            _list(dict(snapshot), config.pinning, store.where, args.json)
            return EXIT_OK
        pins = snapshot.get(args.backend)
        if pins is None:
            known = ", ".join(sorted(snapshot)) or "none yet"
            raise UsageError(
                f"no tools of {args.backend!r} are pinned in {store.where} (pinned backends: {known}); a backend's "
                "tools are pinned when a gateway first lists them"
            )
        chosen = [args.tool] if args.tool else sorted(pins.pending)
        if args.tool and args.tool not in pins.pending:
            waiting = ", ".join(sorted(pins.pending)) or "none"
            raise UsageError(f"{args.backend}.{args.tool} does not wait for approval (waiting: {waiting})")
        if not chosen:
            note(f"agentify pins approve: nothing of {args.backend} waits for approval")
            return EXIT_OK
        for name in chosen:
            waiting_record = pins.pending[name]
            old = pins.approved.get(name)
            say(f"{args.backend}.{name}: {waiting_record.reason}")
            say(difference(dict(old.definition) if old else None, dict(waiting_record.definition), name))
            say()
        accepted = store.approve(args.backend, chosen)
    except PinStoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    note(
        f"agentify pins approve: accepted {len(accepted)} definition(s) of {args.backend} in {store.where}; "
        "running gateways use them without a restart"
    )
    return EXIT_OK


def _list(snapshot: dict[str, BackendPins], mode: str, where: str, as_json: bool) -> None:
    if as_json:
        backends = {
            backend: {
                "pinned": {k: {"sha256": v.digest, "how": v.how} for k, v in sorted(p.approved.items())},
                "waiting": {k: {"sha256": v.digest, "reason": v.reason} for k, v in sorted(p.pending.items())},
            }
            for backend, p in sorted(snapshot.items())
        }
        say(json.dumps({"pinning": mode, "store": where, "backends": backends}, indent=2))
        return
    say(f"pinning: {mode} (pins in {where})")
    if not snapshot:
        say("nothing pinned yet: a backend's tools are pinned when a gateway first lists them")
    for backend, pins in sorted(snapshot.items()):
        say(f"{backend}: {len(pins.approved)} pinned, {len(pins.pending)} waiting for approval")
        for name, record in sorted(pins.approved.items()):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.at))
            how = "trusted on first use" if record.how == "first-use" else "approved"
            marker = " (a new definition waits)" if name in pins.pending else ""
            say(f"  pinned   {name}  sha256:{record.digest[:12]}  {how} {when}{marker}")
        for name, record in sorted(pins.pending.items()):
            say(f"  waiting  {name}  sha256:{record.digest[:12]}  {record.reason}")
            say(f"           approve: agentify pins approve {backend} {name}")
