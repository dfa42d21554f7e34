"""Configuration: pydantic models, and loading and merging of every source.

Precedence, highest first: command-line flags; environment; the `initializationOptions`
of the MCP `initialize` request; the config file; defaults. The file is JSON and holds
backends either as agentify's `backends` list or as the `mcpServers` map of Cursor and
Claude Desktop. `${VAR}` (or `${VAR:-default}`) in any string of the file is replaced
from the environment.

Raises `ConfigError` (never a pydantic or JSON traceback) with the path of the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from agentify.config_keys import COMMENT, check_keys, model_keys, suggested_keys, unknown_key_problem
from agentify.credentials import header_credential, is_credential, mask_url, names_a_place, url_secrets
from agentify.errors import ConfigError

BACKEND_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LogLevel = Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"]
DEFAULT_MODEL = "gpt-5.4-mini"
Exposed = Literal["orchestrate", "search"]
EXPOSED: tuple[Exposed, ...] = ("orchestrate", "search")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Keys of other clients' `mcpServers` entries that are not BackendConfig fields (DESIGN.md,
# "Remote backends"): accepted, and mapped where the backends are loaded.
MCP_SERVER_KEYS = ("disabled", "type", "url", "serverUrl", "headers")
# Environment variables and the config key each one sets.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("planner", "apiKey"),
    "OPENAI_BASE_URL": ("planner", "baseUrl"),
    "AGENTIFY_MODEL": ("planner", "model"),
    "AGENTIFY_PLANNER": ("planner", "provider"),
    "AGENTIFY_LOG_LEVEL": ("logLevel",),
    "AGENTIFY_DEBUG_PORT": ("debugPort",),
}


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid")


class ToolFilter(_Model):
    allow: list[str] | None = Field(default=None, description="Only these tools are offered (None: all).")
    deny: list[str] = Field(default_factory=list, description="These tools are never offered nor called.")
    confirm: list[str] = Field(default_factory=list, description="These tools run only after the user confirms.")

    def permits(self, tool: str) -> bool:
        return tool not in self.deny and (self.allow is None or tool in self.allow)


class BearerAuth(_Model):
    type: Literal["bearer"]
    token: str = Field(min_length=1, repr=False)


class OAuthSettings(_Model):
    type: Literal["oauth"]
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)
    scopes: list[str] | None = None


Transport = Literal["streamable-http", "sse"]


class BackendConfig(_Model):
    id: str
    command: str | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1)
    transport: Transport | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    auth: BearerAuth | OAuthSettings | None = Field(default=None, discriminator="type")
    start: Literal["eager", "lazy"] = "eager"
    idle_stop_seconds: float | None = Field(default=None, gt=0)
    forward_roots: bool = False
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    description: str = ""
    timeout_seconds: float = Field(default=60.0, gt=0)
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    enabled: bool = True
    allow_destructive: bool = False
    tools: ToolFilter = Field(default_factory=ToolFilter)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not BACKEND_ID.match(value):
            raise ValueError(f"{value!r} is not a valid backend id: use 1-64 of the characters a-z A-Z 0-9 _ -")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError(f"{mask_url(value)!r} is not an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _command_or_url(self) -> BackendConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"backend {self.id!r} needs exactly one of command (a local stdio server) or url (a remote server)"
            )
        if self.url is None and (self.transport or self.headers or self.auth):
            raise ValueError(f"backend {self.id!r}: transport, headers and auth apply to url backends only")
        return self

    @property
    def remote(self) -> bool:
        return self.url is not None

    @property
    def oauth(self) -> bool:
        return isinstance(self.auth, OAuthSettings)

    def secret_values(self) -> list[str]:
        """This backend's credentials: every header value, the bearer token, the client secret, a URL's
        password and secret-looking query values, and env values that are credentials (by name or look)."""
        values = [v for k, v in self.env.items() if is_credential(k, v)]
        values.extend(self.headers.values())
        values.extend(c for c in map(header_credential, self.headers.values()) if c)
        if isinstance(self.auth, BearerAuth):
            values.append(self.auth.token)
        elif isinstance(self.auth, OAuthSettings) and self.auth.client_secret:
            values.append(self.auth.client_secret)
        values.extend(url_secrets(self.url))
        return values

    def where(self) -> str:
        """How the backend is reached, for people: the command, or the URL with its secrets masked."""
        return mask_url(self.url) if self.url else " ".join([self.command or "", *self.args])


class PlannerConfig(_Model):
    provider: Literal["auto", "openai", "sampling", "offline"] = "auto"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    shortlist: int = Field(default=24, ge=1)


class Config(_Model):
    backends: list[BackendConfig] = Field(default_factory=list)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    debug_port: int | None = Field(default=None, ge=0, le=65535)
    debug_host: str = "127.0.0.1"
    log_level: LogLevel = "INFO"
    trace_file: str | None = None
    max_query_chars: int = Field(default=20_000, ge=1)
    max_context_chars: int = Field(default=20_000, ge=100)
    max_result_chars: int = Field(default=1_000_000, ge=1000)
    expose: list[Exposed] = Field(
        default_factory=lambda: list(EXPOSED),
        min_length=1,
        description="Which tools the IDE sees: orchestrate (orchestrate_task, plan_task, list_backends) "
        "and search (search_tools, call_tool).",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_ids(self) -> Config:
        seen: set[str] = set()
        for backend in self.backends:
            if backend.id in seen:
                raise ValueError(f"backend id {backend.id!r} is used twice; ids must be unique")
            seen.add(backend.id)
        return self

    def secrets(self) -> list[str]:
        """What every sink masks (logs, traces, the console, results): the API key, every value that came
        from `${VAR}`, and each backend's credentials (`BackendConfig.secret_values`).
        `NODE_ENV=production` is not a secret: masking it would blank the word out of every log line."""
        values = [self.planner.api_key or "", *self._expanded]
        for backend in self.backends:
            values.extend(backend.secret_values())
        return sorted({v for v in values if v})

    _expanded: frozenset[str] = PrivateAttr(default_factory=frozenset)


@dataclass
class ConfigSources:
    """The layers that `resolve` merges; `initialize` can add one later, so they are kept."""

    file: dict[str, Any] = field(default_factory=dict)
    file_path: Path | None = None
    env: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    expanded: set[str] = field(default_factory=set)
    """Every value `${VAR}` was replaced with: each is a secret wherever it ends up."""

    def resolve(self, init_options: Mapping[str, Any] | None = None) -> Config:
        merged: dict[str, Any] = {}
        for layer in (self.file, _from_init_options(init_options or {}), self.env, self.flags):
            _deep_merge(merged, layer)
        merged, unknown = check_keys(Config, merged)
        if unknown:
            raise ConfigError(_where(self.file_path) + "; ".join(unknown))
        try:
            config = Config.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, self.file_path, self._origin)) from None
        base = self.file_path.parent if self.file_path else Path.cwd()
        for backend in config.backends:
            backend.cwd = str((base / backend.cwd).resolve()) if backend.cwd else str(base.resolve())
        if config.trace_file:
            config.trace_file = str((base / Path(config.trace_file).expanduser()).resolve())
        config._expanded = frozenset(self.expanded)
        return config

    def _origin(self, location: tuple[str | int, ...]) -> str | None:
        """Where a failing value came from, when not from the file: the flag or the variable."""
        if _lookup(self.flags, location):
            return "the command line"
        for variable, key in ENV_KEYS.items():
            if location[: len(key)] == key and _lookup(self.env, key):
                return variable
        return None


def _lookup(layer: Mapping[str, Any], location: tuple[str | int, ...]) -> bool:
    value: Any = layer
    for part in location:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def load_sources(
    config_path: str | None, flags: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> ConfigSources:
    """Reads the file and the environment; `flags` are the command line's (None values ignored)."""
    environ = os.environ if environ is None else environ
    path_text = config_path or environ.get("AGENTIFY_CONFIG")
    path = Path(path_text) if path_text else Path("agentify.json")
    file_layer: dict[str, Any] = {}
    expanded: set[str] = set()
    if path.exists() or path_text:
        file_layer = _normalise_backends(_expand(_read_json(path), environ, "config", expanded), f"config file {path}")
    return ConfigSources(
        file=file_layer,
        expanded=expanded,
        file_path=path.resolve() if file_layer or path.exists() else None,
        env=_from_environment(environ),
        flags={k: v for k, v in flags.items() if v is not None},
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist: pass --config with an existing file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object, not {type(data).__name__}")
    return data


def _expand(value: Any, environ: Mapping[str, str], where: str, expanded: set[str]) -> Any:
    """Replaces `${VAR}` in every string; each value taken from the environment is added to `expanded`."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                if not names_a_place(name):
                    expanded.add(environ[name])
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{where} uses ${{{name}}} but the environment variable {name} is not set: "
                f"set it, or write ${{{name}:-default}} to give a default"
            )

        return _VAR.sub(substitute, value)
    if isinstance(value, dict):
        return {k: _expand(v, environ, f"{where}.{k}", expanded) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, f"{where}.{i}", expanded) for i, v in enumerate(value)]
    return value


def _normalise_backends(layer: dict[str, Any], source: str) -> dict[str, Any]:
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


def _from_init_options(options: Mapping[str, Any]) -> dict[str, Any]:
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
        layer.update(_normalise_backends({"mcpServers": backends}, "initializationOptions"))
    elif backends is not None:
        layer["backends"] = backends
    return layer


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for variable, key in ENV_KEYS.items():
        if environ.get(variable):
            _deep_merge(layer, _nested(key, environ[variable]))
    return layer


def _nested(key: tuple[str, ...], value: Any) -> dict[str, Any]:
    for part in reversed(key[1:]):
        value = {part: value}
    return {key[0]: value}


def _deep_merge(target: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Objects merge key by key; everything else (lists included) is replaced by the higher layer."""
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = dict(value) if isinstance(value, Mapping) else value


def _where(path: Path | None) -> str:
    return f"invalid configuration (from {path} and the environment): " if path else "invalid configuration: "


def _describe(exc: ValidationError, path: Path | None, origin: Callable[[tuple[str | int, ...]], str | None]) -> str:
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        location = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        source = origin(error["loc"]) if error["loc"] else None
        problems.append(f"{location} (from {source}): {message}" if source else f"{location}: {message}")
    return _where(path) + "; ".join(problems)
