"""agentify among its own backends.

The README has users register agentify in their IDE and then point it at the config they already
have, which holds that same entry: a gateway would start a gateway that starts a gateway, without
end. Two guards, because a wrapper script hides what it starts:
- an entry that visibly starts agentify's gateway (`agentify`, `python -m agentify`) is dropped with
  one warning when the config is loaded; the arbigent runner (`agentify arbigent`) is a backend like
  any other;
- every backend process gets `PARENT_VARIABLE` (the gateway's pid), and a gateway started with it
  refuses to start (the command line's check), so a chain ends at its second link whatever started it.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from loguru import logger

PARENT_VARIABLE = "AGENTIFY_PARENT"
"""Set to the gateway's pid in the environment of each backend it starts."""


def starts_gateway(command: str, args: list[Any]) -> bool:
    """Whether `command args` starts agentify's gateway (serve, run, doctor...), not its arbigent runner."""
    name = PurePath(command.replace("\\", "/")).name.lower().removesuffix(".exe")
    rest = [str(a) for a in args]
    if name.startswith("python") and rest[:2] == ["-m", "agentify"]:
        rest = rest[2:]
    elif name != "agentify":
        return False
    return rest[:1] != ["arbigent"]


def drop_itself(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` (a config file or `initializationOptions`) without the backends that start agentify's gateway,
    in `backends` and in the `mcpServers` / `servers` maps; each is logged once. Done before `${...}` is
    expanded: agentify's own entry in a VS Code file may use an `${input:...}` that only VS Code can ask."""
    kept = dict(data)
    for key in ("backends", "mcpServers", "servers", "context_servers"):
        entries = data.get(key)
        if isinstance(entries, list):
            kept[key] = [e for e in entries if not _itself(e, e.get("id") if isinstance(e, dict) else None, source)]
        elif isinstance(entries, dict):
            kept[key] = {k: e for k, e in entries.items() if not _itself(e, k, source)}
    return kept


def _itself(entry: Any, name: Any, source: str) -> bool:
    if not (isinstance(entry, dict) and isinstance(entry.get("command"), str)):
        return False
    args = entry.get("args")
    if not starts_gateway(entry["command"], args if isinstance(args, list) else []):
        return False
    logger.warning(
        "backend {!r} in the {} starts agentify itself: skipped (a gateway inside its own gateway would start "
        "itself without end). Remove it from the backends agentify reads.",
        name,
        source,
    )
    return True
