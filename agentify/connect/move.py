"""What connecting an IDE changes, computed before anything is written (so `--dry-run` shows it).

Every server of the IDE's file lands in agentify's config under `mcpServers`, exactly as it was
(env, headers, envFile and every other key), except:
- an entry that starts agentify itself is replaced by the new one, never moved behind it;
- a name agentify's config already uses for the same server is left as it is (nothing to move);
  for a different server the moved one is renamed `<name>-<ide>` and the report says so;
- VS Code's `${input:ID}` can only be asked for by VS Code: the value is handed to agentify through
  its entry's env (`AGENTIFY_INPUT_<ID>: "${input:ID}"`) and the moved server reads `${AGENTIFY_INPUT_<ID>}`.
  Ids that spell the same variable (`gh.token`, `gh-token`) get distinct names: the later one carries a
  hash of its id, so no server is ever handed another server's secret. An id agentify could not pass
  (`weird id`) is refused before anything is written.
The IDE's file keeps all its other keys (VS Code's `inputs`, Claude Desktop's preferences).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentify._common import json_input, jsonc
from agentify.connect import ConnectError
from agentify.connect.ides import Ide, config_of, is_agentify
from agentify.security.credentials import argument_secrets

_INPUT = re.compile(r"\$\{input:([A-Za-z0-9_.-]{1,128})\}")
_ANY_INPUT = re.compile(r"\$\{input:([^}]{0,200})\}?")
_SECRET_KEYS = ("env", "headers", "auth")


@dataclass
class Connection:
    ide: Ide
    ide_file: Path
    config_file: Path
    ide_before: bytes | None
    config_before: bytes | None
    ide_after: bytes = b""
    config_after: bytes = b""
    moved: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    already: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    """The values of env, headers and auth of the servers, and their secret arguments (`--api-key VALUE`):
    masked wherever the files are shown."""


def _object(data: bytes | None, path: Path, *, comments: bool) -> dict[str, Any]:
    if data is None or not data.strip():
        return {}
    try:
        text = data.decode("utf-8-sig")
        doc = jsonc.loads(text) if comments else json_input.loads(text)
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text; nothing was changed") from None
    except json.JSONDecodeError as exc:
        raise ConnectError(f"{path} is not valid JSON ({exc}); fix it and run again, nothing was changed") from None
    except json_input.TooDeep as exc:
        raise ConnectError(f"{path} {exc}; nothing was changed") from None
    if not isinstance(doc, dict):
        raise ConnectError(f"{path} holds a JSON {type(doc).__name__}, not an object; nothing was changed")
    return doc


def _servers(doc: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    servers = doc.get(key, {})
    if not isinstance(servers, dict):
        raise ConnectError(f'"{key}" in {path} is not an object of named servers; nothing was changed')
    return servers


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _variable(input_id: str, env: dict[str, str]) -> str:
    """The variable that carries `input_id`: one per id, never shared with another id."""
    wanted = f"${{input:{input_id}}}"
    base = name = "AGENTIFY_INPUT_" + re.sub(r"[^A-Za-z0-9_]", "_", input_id).upper()
    digest, n = hashlib.sha256(input_id.encode()).hexdigest().upper(), 8
    while env.get(name, wanted) != wanted:
        name, n = f"{base}_{digest[:n]}", n + 4
    return name


def _pass_inputs(value: Any, env: dict[str, str]) -> Any:
    """`value` with each `${input:ID}` read from agentify's environment, which the IDE fills.

    Raises `ConnectError` for an input id outside what VS Code's ids and agentify's variables share."""
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            name = _variable(match.group(1), env)
            env[name] = match.group()
            return "${" + name + "}"

        passed = _INPUT.sub(variable, value)
        if (odd := _ANY_INPUT.search(passed)) is not None:
            raise ConnectError(
                f"the input id {odd.group(1)[:80]!r} cannot be passed to agentify: use letters, digits, '_', '.' "
                "or '-' (at most 128) in the IDE's `inputs` and the `${input:...}` that names it; nothing was changed"
            )
        return passed
    if isinstance(value, dict):
        return {k: _pass_inputs(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_pass_inputs(v, env) for v in value]
    return value


def _free_name(name: str, ide: str, taken: set[str]) -> str:
    candidate, n = f"{name}-{ide}", 2
    while candidate in taken:
        candidate, n = f"{name}-{ide}-{n}", n + 1
    return candidate


def _dump(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def plan(
    ide: Ide,
    ide_file: Path,
    config_file: Path,
    command: list[str],
    ide_before: bytes | None,
    config_before: bytes | None,
) -> Connection:
    """The connection of `ide_file` to agentify serving `config_file`; writes nothing.

    Raises `ConnectError` when either file cannot be read as it should, or when the IDE already
    starts an agentify with another config."""
    result = Connection(ide, ide_file, config_file, ide_before, config_before)
    doc = _object(ide_before, ide_file, comments=True)
    servers = _servers(doc, ide.key, ide_file)
    config = _object(config_before, config_file, comments=False)
    existing = _servers(config, "mcpServers", config_file)
    own = config.get("backends")
    own = own if isinstance(own, list) else []
    taken = set(existing) | {b["id"] for b in own if isinstance(b, dict) and isinstance(b.get("id"), str)}
    merged = dict(existing)
    env: dict[str, str] = {}
    for name, server in servers.items():
        if is_agentify(server):
            other = config_of(server)
            if other is not None and Path(other).expanduser().resolve() != config_file.resolve():
                raise ConnectError(
                    f"{ide_file} already starts agentify with --config {other}; run `agentify connect "
                    f"{ide.name} --config {other}` to move the servers there, or remove that entry first"
                )
            continue
        if isinstance(server, dict):
            result.secrets += [s for key in _SECRET_KEYS for s in _strings(server.get(key))]
            result.secrets += argument_secrets(server.get("args"))
        server = _pass_inputs(server, env) if ide.name == "vscode" else server
        if existing.get(name) == server:
            result.already.append(name)
            continue
        target = name
        if name in taken:
            target = _free_name(name, ide.name, taken)
            result.renamed[name] = target
        taken.add(target)
        merged[target] = server
        result.moved.append(name)
    if "mcpServers" in config or merged:
        config["mcpServers"] = merged
    result.config_after = _dump(config)
    doc[ide.key] = {"agentify": ide.entry(command, config_file, env)}
    result.ide_after = _dump(doc)
    return result
