"""The backend spellings of other MCP clients, turned into agentify's own `backends` entries, so a
config file works as the IDE wrote it.

- The maps: `mcpServers` (Cursor, Claude Desktop / Code, Cline, Roo, Windsurf, Gemini, arbigent's
  `mcpJson`), VS Code's `servers` and Zed's `context_servers` (`zed_servers`); VS Code's `inputs` and
  `$schema` beside them; every other top-level key of such a file (Zed's `theme`) is another client's.
- Remote entries: Cursor's `url` / `headers`, VS Code's and Claude Code's `type`, Windsurf's
  `serverUrl`, Gemini's `httpUrl` (streamable HTTP).
- Per entry: Cursor's and VS Code's `envFile`; Cline's `autoApprove` and Roo's `alwaysAllow` (tools
  that run without a confirmation); `timeout` (seconds for Cline and Roo, milliseconds for Gemini) and
  `disabled`; Windsurf's `disabledTools`, Gemini's `includeTools` / `excludeTools`.
- Keys of other clients that agentify does not use are ignored, named in one log line. One close to
  a key agentify knows (`comand`) is still an error, as in agentify's own `backends`, which stay strict.
- The seed's `initializationOptions` keys.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from agentify.config.envfile import read_env_file
from agentify.config.itself import drop_itself
from agentify.config.keys import COMMENT, model_keys, suggested_keys, unknown_key_problem
from agentify.config.models import BACKEND_ID, BackendConfig, Config
from agentify.errors import ConfigError

SCHEMA = "$schema"
ZED = "context_servers"
MAPS = ("mcpServers", "servers", ZED)
PROBLEM = "$problem"
"""Set by the loader on a server entry that cannot start as written (a variable it uses is not set)."""
# Keys of other clients' entries that are not BackendConfig fields but are mapped below.
MCP_SERVER_KEYS = (
    "disabled",
    "type",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
    "envFile",
    "autoApprove",
    "alwaysAllow",
    "timeout",
    "disabledTools",
    "includeTools",
    "excludeTools",
)
_GEMINI_KEYS = {"httpUrl", "includeTools", "excludeTools", "trust"}
# Other clients' keys that agentify has no use for; never taken for typos of its own.
_FOREIGN = {"transportType", "trust", "dev", "gallery", "version", "watchPaths", "networkTimeout", "sandbox"}
IDE_FOLDERS = (".vscode", ".cursor", ".roo", ".gemini", ".windsurf", ".kiro", ".zed", ".agentify")
_TYPOS = 0.8  # how close an unknown key must be to a known one to be a typo rather than another client's


def zed_servers(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` with Zed's `context_servers` in the spelling of the other clients: its older
    `{"command": {"path", "args", "env"}}` flattened, its `source` and `settings` dropped, and the
    servers an extension provides (nothing agentify can start) skipped, in one log line."""
    servers = data.get(ZED)
    if not isinstance(servers, dict):
        return data
    kept: dict[str, Any] = {}
    skipped: list[str] = []
    for name, server in servers.items():
        if not isinstance(server, dict):
            kept[name] = server  # normalise_backends names the mistake
            continue
        entry = {k: v for k, v in server.items() if k not in ("source", "settings", "command")}
        command = server.get("command")
        if isinstance(command, dict):
            entry |= {"command": command.get("path")} | {k: command[k] for k in ("args", "env") if k in command}
        elif command is not None:
            entry["command"] = command
        if "command" not in entry and "url" not in entry:
            skipped.append(name)
            continue
        kept[name] = entry
    if skipped:
        logger.info(
            "{}: Zed servers without a command (provided by an extension) skipped: {}", source, ", ".join(skipped)
        )
    return data | {ZED: kept}


def workspace_folder(config_path: Path | None) -> Path:
    """Where relative paths and `${workspaceFolder}` point: the folder that holds `.vscode/`, `.cursor/`
    (and the like) for a file inside one, else the file's own folder (the current one without a file)."""
    if config_path is None:
        return Path.cwd()
    folder = config_path.resolve().parent
    return folder.parent if folder.name in IDE_FOLDERS else folder


def normalise_backends(layer: dict[str, Any], source: str, config_path: Path | None = None) -> dict[str, Any]:
    """Turns the `mcpServers` / `servers` maps into `backends` entries (appended after the native list)."""
    layer.pop(SCHEMA, None)
    maps = [(key, layer.pop(key)) for key in MAPS if key in layer]
    if not maps:
        return layer
    ignored = _foreign_top_keys(layer)
    backends = layer.get("backends") or []
    if not isinstance(backends, list):
        raise ConfigError(f"backends in the {source} must be a list of backends, not {type(backends).__name__}")
    backends = list(backends)
    context = _Context(source, workspace_folder(config_path), is_gemini(config_path, layer, maps))
    for key, servers in maps:
        if not isinstance(servers, dict):
            raise ConfigError(f"{key} in the {source} must be an object mapping ids to servers")
        for server_id, server in servers.items():
            if server_id in (COMMENT, SCHEMA):
                continue
            if not isinstance(server, dict):
                raise ConfigError(f"{key}.{server_id} in the {source} must be an object")
            ignored.extend(f"{key}.{server_id}.{k}" for k in _foreign_keys(server, f"{key}.{server_id}", source))
            backends.append(_server_entry(_as_id(server_id, source), server, context))
    if ignored:
        logger.info("{}: ignored keys that agentify does not use: {}", source, ", ".join(ignored))
    layer["backends"] = backends
    return layer


def is_gemini(config_path: Path | None, layer: dict[str, Any], maps: list[tuple[str, Any]] | None = None) -> bool:
    """A Gemini CLI `settings.json`: in a `.gemini` folder, or with a server using one of Gemini's own keys."""
    if config_path is not None and config_path.resolve().parent.name == ".gemini":
        return True
    maps = maps if maps is not None else [(key, layer[key]) for key in MAPS if key in layer]
    return any(
        isinstance(server, dict) and bool(_GEMINI_KEYS & set(server))
        for _, servers in maps
        if isinstance(servers, dict)
        for server in servers.values()
    )


def _as_id(name: str, source: str) -> str:
    """A server name as a backend id: Cline names servers it installs by their repository path
    (`github.com/org/repo`), which is no valid id; such a name is spelled with `_` and said so."""
    if BACKEND_ID.match(name):
        return name
    backend_id = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[-64:] or "_"
    logger.info("{}: server {!r} is backend {!r} (ids are 1-64 of a-z A-Z 0-9 _ -)", source, name, backend_id)
    return backend_id


@dataclass(frozen=True)
class _Context:
    source: str
    workspace: Path
    gemini: bool
    """A Gemini `settings.json`, whose `timeout` is in milliseconds."""


def _foreign_top_keys(layer: dict[str, Any]) -> list[str]:
    """Pops the top-level keys of another client's file (Claude Desktop's `globalShortcut`...); a key close
    to one of agentify's stays, for the strict check to name."""
    known = set(model_keys(Config)) | {COMMENT}
    foreign = [k for k in layer if k not in known and not difflib.get_close_matches(k, known, n=1, cutoff=_TYPOS)]
    for key in foreign:
        del layer[key]
    return foreign


def _foreign_keys(server: dict[str, Any], path: str, source: str) -> list[str]:
    fields = set(model_keys(BackendConfig)) - {"id"}
    valid = [*(k for k in suggested_keys(BackendConfig) if k != "id"), *MCP_SERVER_KEYS]
    unknown = [k for k in server if k not in fields and k not in MCP_SERVER_KEYS and k not in (COMMENT, PROBLEM)]
    typos = [k for k in unknown if k not in _FOREIGN and difflib.get_close_matches(k, valid, n=1, cutoff=_TYPOS)]
    if typos:
        problems = [unknown_key_problem(k, path, valid) for k in typos]
        raise ConfigError(f"invalid configuration in the {source}: " + "; ".join(problems))
    return unknown


_TYPES = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http"}


def _server_entry(server_id: str, server: dict[str, Any], context: _Context) -> dict[str, Any]:
    """One entry in the spelling of any of the clients above, as an agentify backend."""
    where = f"mcpServers.{server_id} in the {context.source}"
    entry: dict[str, Any] = {"id": server_id, "enabled": not server.get("disabled", False)}
    url = server.get("url", server.get("serverUrl"))
    kind = server.get("type", server.get("transport"))
    if "httpUrl" in server:
        url, kind = server["httpUrl"], "http"
    if url is None and "command" not in server:
        raise ConfigError(
            f"{where} has neither command (a local server) nor url / serverUrl / httpUrl (a remote one): "
            "add one of them"
        )
    if url is not None:
        entry["url"] = url
        if kind == "sse":
            entry["transport"] = "sse"
        elif kind in _TYPES:
            entry["transport"] = _TYPES[kind]
        elif kind not in (None, "stdio"):
            raise ConfigError(f"mcpServers.{server_id}.type {kind!r} is not one of http, streamable-http, sse")
        for key in ("headers", "auth"):
            if key in server:
                entry[key] = server[key]
    else:
        for key in ("command", "args", "env", "cwd"):
            if key in server:
                entry[key] = server[key]
        if isinstance(server.get("envFile"), str):
            values = read_env_file(context.workspace / server["envFile"], f"{where}, envFile")
            entry["env"] = values | (server.get("env") or {})  # `env` wins, as in Cursor and VS Code
    # Every other key that is a backend field (description, tools, start, allowDestructive...) is kept.
    fields = set(model_keys(BackendConfig)) - {"id", "url", "command", "args", "env", "cwd", "headers", "auth"}
    entry |= {k: v for k, v in server.items() if k in fields}
    if isinstance(server.get("timeout"), int | float) and not isinstance(server["timeout"], bool):
        gemini = context.gemini or bool(_GEMINI_KEYS & set(server))
        entry.setdefault("timeoutSeconds", server["timeout"] / 1000 if gemini else server["timeout"])
    _tool_lists(entry, server)
    if PROBLEM in server:
        entry[PROBLEM] = server[PROBLEM]
    return entry


def _tool_lists(entry: dict[str, Any], server: dict[str, Any]) -> None:
    """Other clients' tool lists, merged into `tools` (allow, deny, autoApprove)."""
    tools = dict(entry.get("tools") or {})
    for key, target in (
        ("disabledTools", "deny"),
        ("excludeTools", "deny"),
        ("includeTools", "allow"),
        ("autoApprove", "autoApprove"),
        ("alwaysAllow", "autoApprove"),
    ):
        names = server.get(key)
        if isinstance(names, list) and names:
            tools[target] = [*(tools.get(target) or []), *names]
    if tools:
        entry["tools"] = tools


def from_init_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Maps the seed's `initializationOptions` keys onto config keys."""
    options = drop_itself(dict(options), "initializationOptions")
    layer: dict[str, Any] = {}
    if "logLevel" in options:
        layer["logLevel"] = options["logLevel"]
    if "DEBUG_PORT" in options:
        layer["debugPort"] = options["DEBUG_PORT"]
    if options.get("OPENAI_API_KEY"):
        layer["planner"] = {"apiKey": options["OPENAI_API_KEY"]}
    backends = options.get("backends")
    if isinstance(backends, dict):
        layer.update(normalise_backends({"mcpServers": backends}, "initializationOptions"))
    elif backends is not None:
        layer["backends"] = backends
    return layer
