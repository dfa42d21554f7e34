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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from agentify.errors import ConfigError

BACKEND_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LogLevel = Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"]
DEFAULT_MODEL = "gpt-5.4-mini"
Exposed = Literal["orchestrate", "search"]
EXPOSED: tuple[Exposed, ...] = ("orchestrate", "search")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid")


class ToolFilter(_Model):
    allow: list[str] | None = Field(default=None, description="Only these tools are offered (None: all).")
    deny: list[str] = Field(default_factory=list, description="These tools are never offered nor called.")
    confirm: list[str] = Field(default_factory=list, description="These tools run only after the user confirms.")

    def permits(self, tool: str) -> bool:
        return tool not in self.deny and (self.allow is None or tool in self.allow)


class BackendConfig(_Model):
    id: str
    command: str = Field(min_length=1)
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


class PlannerConfig(_Model):
    provider: Literal["auto", "openai", "sampling", "offline"] = "auto"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    shortlist: int = Field(default=24, ge=1)


class Config(_Model):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore")

    backends: list[BackendConfig] = Field(default_factory=list)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    debug_port: int | None = Field(default=None, ge=0, le=65535)
    debug_host: str = "127.0.0.1"
    log_level: LogLevel = "INFO"
    trace_file: str | None = None
    max_query_chars: int = Field(default=20_000, ge=1)
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
        """What logs, traces and the console mask: the API key and every value of a backend's env."""
        values = [self.planner.api_key or ""]
        for backend in self.backends:
            values.extend(backend.env.values())
        return [v for v in values if v]

    def credential_secrets(self) -> list[str]:
        """What is also masked inside backend results: the API key and env values that are credentials
        (by name, or long random-looking values); `NODE_ENV=production` must not blank out a file's text."""
        values = [self.planner.api_key or ""]
        for backend in self.backends:
            values.extend(v for k, v in backend.env.items() if _is_credential(k, v))
        return [v for v in values if v]


_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|passw|auth|credential|private|session|cookie")


def _is_credential(name: str, value: str) -> bool:
    random_looking = len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return bool(_CREDENTIAL_NAME.search(name)) or (random_looking and "/" not in value)


@dataclass
class ConfigSources:
    """The layers that `resolve` merges; `initialize` can add one later, so they are kept."""

    file: dict[str, Any] = field(default_factory=dict)
    file_path: Path | None = None
    env: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)

    def resolve(self, init_options: Mapping[str, Any] | None = None) -> Config:
        merged: dict[str, Any] = {}
        for layer in (self.file, _from_init_options(init_options or {}), self.env, self.flags):
            _deep_merge(merged, layer)
        try:
            config = Config.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, self.file_path)) from None
        base = self.file_path.parent if self.file_path else Path.cwd()
        for backend in config.backends:
            backend.cwd = str((base / backend.cwd).resolve()) if backend.cwd else str(base.resolve())
        return config


def load_sources(
    config_path: str | None, flags: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> ConfigSources:
    """Reads the file and the environment; `flags` are the command line's (None values ignored)."""
    environ = os.environ if environ is None else environ
    path_text = config_path or environ.get("AGENTIFY_CONFIG")
    path = Path(path_text) if path_text else Path("agentify.json")
    file_layer: dict[str, Any] = {}
    if path.exists() or path_text:
        file_layer = _normalise_backends(_expand(_read_json(path), environ, "config"), "config file")
    return ConfigSources(
        file=file_layer,
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
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object, not {type(data).__name__}")
    return data


def _expand(value: Any, environ: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{where} uses ${{{name}}} but the environment variable {name} is not set: "
                f"set it, or write ${{{name}:-default}} to give a default"
            )

        return _VAR.sub(substitute, value)
    if isinstance(value, dict):
        return {k: _expand(v, environ, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, f"{where}.{i}") for i, v in enumerate(value)]
    return value


def _normalise_backends(layer: dict[str, Any], source: str) -> dict[str, Any]:
    """Turns an `mcpServers` map into `backends` entries (appended after the native list)."""
    servers = layer.pop("mcpServers", None)
    if servers is None:
        return layer
    if not isinstance(servers, dict):
        raise ConfigError(f"mcpServers in the {source} must be an object mapping ids to servers")
    backends = list(layer.get("backends") or [])
    for server_id, server in servers.items():
        if not isinstance(server, dict):
            raise ConfigError(f"mcpServers.{server_id} in the {source} must be an object")
        if "command" not in server:
            logger.warning("mcpServers.{} has no command (only stdio servers are supported); skipped", server_id)
            continue
        entry: dict[str, Any] = {"id": server_id, "enabled": not server.get("disabled", False)}
        for key in ("command", "args", "env", "cwd", "description", "timeoutSeconds", "startupTimeoutSeconds", "tools"):
            if key in server:
                entry[key] = server[key]
        backends.append(entry)
    layer["backends"] = backends
    return layer


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
    planner = {
        key: environ[var]
        for key, var in (
            ("apiKey", "OPENAI_API_KEY"),
            ("baseUrl", "OPENAI_BASE_URL"),
            ("model", "AGENTIFY_MODEL"),
            ("provider", "AGENTIFY_PLANNER"),
        )
        if environ.get(var)
    }
    layer: dict[str, Any] = {"planner": planner} if planner else {}
    if environ.get("AGENTIFY_LOG_LEVEL"):
        layer["logLevel"] = environ["AGENTIFY_LOG_LEVEL"]
    if environ.get("AGENTIFY_DEBUG_PORT"):
        layer["debugPort"] = environ["AGENTIFY_DEBUG_PORT"]
    return layer


def _deep_merge(target: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Objects merge key by key; everything else (lists included) is replaced by the higher layer."""
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = dict(value) if isinstance(value, Mapping) else value


def _describe(exc: ValidationError, path: Path | None) -> str:
    where = f" (from {path} and the environment)" if path else ""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        location = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        problems.append(f"{location}: {message}")
    return f"invalid configuration{where}: " + "; ".join(problems)
