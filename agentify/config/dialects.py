"""The backend spellings of other MCP clients, turned into agentify's own `backends` entries.

An `mcpServers` map (Cursor, Claude Desktop, arbigent's `mcpJson`) with the remote spellings of
Cursor (`url`, `headers`), VS Code / Claude Code (`type`, `url`, `headers`) and Windsurf
(`serverUrl`); and the seed's `initializationOptions` keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentify.config.keys import COMMENT, model_keys, suggested_keys, unknown_key_problem
from agentify.config.models import BackendConfig
from agentify.errors import ConfigError

# Keys of other clients' `mcpServers` entries that are not BackendConfig fields (DESIGN.md,
# "Remote backends"): accepted, and mapped where the backends are loaded.
MCP_SERVER_KEYS = ("disabled", "type", "url", "serverUrl", "headers")


def normalise_backends(layer: dict[str, Any], source: str) -> dict[str, Any]:
    """Turns an `mcpServers` map into `backends` entries (appended after the native list)."""
    servers = layer.pop("mcpServers", None)
    if servers is None:
        return layer
    if not isinstance(servers, dict):
        raise ConfigError(f"mcpServers in the {source} must be an object mapping ids to servers")
    backends = layer.get("backends") or []
    if not isinstance(backends, list):
        raise ConfigError(f"backends in the {source} must be a list of backends, not {type(backends).__name__}")
    backends = list(backends)
    fields = set(model_keys(BackendConfig)) - {"id"}
    valid = [*(k for k in suggested_keys(BackendConfig) if k != "id"), *MCP_SERVER_KEYS]
    for server_id, server in servers.items():
        if server_id == COMMENT:
            continue
        if not isinstance(server, dict):
            raise ConfigError(f"mcpServers.{server_id} in the {source} must be an object")
        unknown = [k for k in server if k not in fields and k not in MCP_SERVER_KEYS and k != COMMENT]
        if unknown:
            problems = [unknown_key_problem(k, f"mcpServers.{server_id}", valid) for k in unknown]
            raise ConfigError(f"invalid configuration in the {source}: " + "; ".join(problems))
        backends.append(_server_entry(server_id, server, source))
    layer["backends"] = backends
    return layer


_TYPES = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http"}


def _server_entry(server_id: str, server: dict[str, Any], source: str) -> dict[str, Any]:
    """One `mcpServers` entry in the spelling of Cursor, VS Code / Claude Code or Windsurf, as a backend."""
    entry: dict[str, Any] = {"id": server_id, "enabled": not server.get("disabled", False)}
    url = server.get("url", server.get("serverUrl"))
    kind = server.get("type", server.get("transport"))
    if url is None and "command" not in server:
        raise ConfigError(
            f"mcpServers.{server_id} in the {source} has neither command (a local server) nor url / serverUrl "
            "(a remote one): add one of them"
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
    # Every other key that is a backend field (description, tools, start, allowDestructive...) is kept.
    fields = set(model_keys(BackendConfig)) - {"id", "url", "command", "args", "env", "cwd", "headers", "auth"}
    entry |= {k: v for k, v in server.items() if k in fields}
    return entry


def from_init_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Maps the seed's `initializationOptions` keys onto config keys."""
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
