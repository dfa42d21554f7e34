"""Loading and merging of every configuration source.

Precedence, highest first: command-line flags; environment; the `initializationOptions`
of the MCP `initialize` request; the config file; defaults. `${VAR}` (or `${VAR:-default}`,
or `${env:VAR}`) in any string of the file is replaced from the environment, `${workspaceFolder}`
with the folder that holds the file's `.vscode/` or `.cursor/` (else the file's own folder). The file
may have comments and trailing commas (JSONC).

Raises `ConfigError` (never a pydantic or JSON traceback) with the path of the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentify._common import json_input, jsonc
from agentify.config.dialects import (
    MAPS,
    PROBLEM,
    from_init_options,
    is_gemini,
    normalise_backends,
    workspace_folder,
    zed_servers,
)
from agentify.config.itself import drop_itself
from agentify.config.keys import check_keys
from agentify.config.models import BackendConfig, Config
from agentify.config.server import TokensAuth
from agentify.errors import ConfigError
from agentify.security.credentials import names_a_place

# A default ends at the next `}` or `${`, so a run of unclosed `${A:-` costs one pass, not one per `${`.
# `env:` is how Cursor and VS Code spell the same; `${input:id}` is a VS Code input (`_VSCODE_INPUT`).
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-((?:[^}$]|\$(?!\{))*))?\}")
# Gemini CLI also reads `$VAR` in its settings (`_VAR`'s groups, then the bare name as group 3).
_GEMINI_VAR = re.compile(_VAR.pattern + r"|\$([A-Za-z_][A-Za-z0-9_]*)")
_VSCODE_INPUT = re.compile(r"\$\{input:([^}$]{0,200})\}")
# Environment variables and the config key each one sets.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("planner", "apiKey"),
    "OPENAI_BASE_URL": ("planner", "baseUrl"),
    "AGENTIFY_MODEL": ("planner", "model"),
    "AGENTIFY_PLANNER": ("planner", "provider"),
    "AGENTIFY_LOG_LEVEL": ("logLevel",),
    "AGENTIFY_DEBUG_PORT": ("debugPort",),
    "AGENTIFY_REDIS_URL": ("server", "redis"),
    "AGENTIFY_TRUSTED_PROXIES": ("server", "trustedProxies"),
}
ENV_LISTS = frozenset({"AGENTIFY_TRUSTED_PROXIES"})
"""The variables that hold a list, comma-separated ("127.0.0.254, 10.0.0.0/8")."""


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
        for layer in (self.file, from_init_options(init_options or {}), self.env, self.flags):
            _deep_merge(merged, layer)
        problems = _take_problems(merged)
        merged, unknown = check_keys(Config, merged)
        if unknown:
            raise ConfigError(_where(self.file_path) + "; ".join(unknown))
        try:
            config = Config.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, self.file_path, self._origin)) from None
        base = workspace_folder(self.file_path)
        for backend in config.backends:
            backend.cwd = str((base / backend.cwd).resolve()) if backend.cwd else str(base.resolve())
        if isinstance(config.server.auth, TokensAuth):
            config.server.auth.file = str((base / Path(config.server.auth.file).expanduser()).resolve())
        access = config.server.access
        if access is not None and access.policy_file:
            access.policy_file = str((base / Path(access.policy_file).expanduser()).resolve())
        if config.server.audit is not None:
            config.server.audit.file = str((base / Path(config.server.audit.file).expanduser()).resolve())
        if config.trace_file:
            config.trace_file = str((base / Path(config.trace_file).expanduser()).resolve())
        for backend in config.backends:
            backend._problem = problems.get(backend.id)
            if backend.inherit_env is None:
                backend.inherit_env = config.inherit_env
        config._expanded = frozenset(self.expanded)
        return config

    def reread(self, environ: Mapping[str, str] | None = None) -> ConfigSources:
        """The same sources with the file read again (the flags kept, the environment read again).

        Raises:
            ConfigError: the file is gone, unreadable or invalid."""
        return load_sources(str(self.file_path) if self.file_path else None, self.flags, environ)

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
        places = {"workspaceFolder": str(workspace_folder(path)), "userHome": str(Path.home())}
        data = drop_itself(zed_servers(_read_json(path), f"config file {path}"), f"config file {path}")
        data.pop("inputs", None)  # VS Code's prompts: only VS Code asks them; `${input:...}` is an error
        data = _expand_file(data, environ, expanded, places, bare=is_gemini(path, data))
        file_layer = normalise_backends(data, f"config file {path}", path)
    return ConfigSources(
        file=file_layer,
        expanded=expanded,
        file_path=path.resolve() if file_layer or path.exists() else None,
        env=_from_environment(environ),
        flags={k: v for k, v in flags.items() if v is not None},
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = json_input.read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist: pass --config with an existing file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except json_input.TooLarge as exc:
        raise ConfigError(f"config file {path} {exc}: check that --config names the right file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    try:
        data = jsonc.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except json_input.TooDeep as exc:
        raise ConfigError(f"config file {path} {exc}: fix its brackets") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object, not {type(data).__name__}")
    return data


def _expand_file(
    data: dict[str, Any], environ: Mapping[str, str], expanded: set[str], places: Mapping[str, str], *, bare: bool
) -> dict[str, Any]:
    """`_expand` over the file, where a backend that uses a variable which is not set does not stop the
    others: it is kept with the message (under `PROBLEM`), and starts as a failed backend that says it.
    `bare`: `$VAR` is expanded too (Gemini CLI's settings)."""
    entries = {key: data.pop(key) for key in ("backends", *MAPS) if key in data}
    result: dict[str, Any] = _expand(data, environ, "config", expanded, places, bare=bare)
    for key, value in entries.items():
        if isinstance(value, list):
            result[key] = [
                _expand_backend(v, environ, f"config.{key}.{i}", expanded, places, bare) for i, v in enumerate(value)
            ]
        elif isinstance(value, dict):
            result[key] = {
                n: _expand_backend(v, environ, f"config.{key}.{n}", expanded, places, bare) for n, v in value.items()
            }
        else:
            result[key] = value  # a wrong type: validation names it
    return result


def _expand_backend(
    entry: Any, environ: Mapping[str, str], where: str, expanded: set[str], places: Mapping[str, str], bare: bool
) -> Any:
    try:
        return _expand(entry, environ, where, expanded, places, bare=bare)
    except ConfigError as exc:
        if not isinstance(entry, dict):
            raise
        kept = _expand(entry, environ, where, expanded, places, strict=False, bare=bare)
        return kept | {PROBLEM: str(exc)}


def _take_problems(merged: dict[str, Any]) -> dict[str, str]:
    """The messages of the backends that could not be expanded, by id; each such backend is taken out of
    `merged` as a stub that validates (it never starts: `BackendConfig.problem` says why)."""
    problems: dict[str, str] = {}
    backends = merged.get("backends")
    if not isinstance(backends, list):
        return problems
    for i, entry in enumerate(backends):
        if not isinstance(entry, dict) or PROBLEM not in entry:
            continue
        entry = {k: v for k, v in entry.items() if k != PROBLEM}
        backend_id = entry.get("id")
        if isinstance(backend_id, str):
            problems[backend_id] = backends[i][PROBLEM]
        try:
            BackendConfig.model_validate(check_keys(BackendConfig, entry)[0])
        except ValidationError:  # what the missing value broke (an empty url): only the id and state stay
            keep = ("id", "enabled", "description")
            entry = {k: v for k, v in entry.items() if k in keep} | {"command": "(not started)"}
        backends[i] = entry
    return problems


def _expand(
    value: Any,
    environ: Mapping[str, str],
    where: str,
    expanded: set[str],
    places: Mapping[str, str],
    *,
    strict: bool = True,
    bare: bool = False,
) -> Any:
    """Replaces `${VAR}` / `${env:VAR}` (and with `bare`, `$VAR`) and `places` (`${workspaceFolder}`) in every
    string; each value taken from the environment is added to `expanded`. Not `strict`: a variable that is
    not set is replaced with nothing, an `${input:...}` is left as it is.

    Raises:
        ConfigError: `strict`, and a variable is not set, or a VS Code `${input:...}` is used (named in the
        message)."""
    if isinstance(value, str):
        if strict and (asked := _VSCODE_INPUT.search(value)) is not None:
            raise ConfigError(
                f"{where} uses ${{input:{asked.group(1)}}}, a VS Code input that only VS Code can ask for: "
                "put the value in an environment variable and write ${env:NAME} instead"
            )

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1) or match.group(3), match.group(2)
            if name in places and not match.group(0).startswith("${env:"):
                return places[name]
            if name in environ:
                if not names_a_place(name):
                    expanded.add(environ[name])
                return environ[name]
            if default is not None:
                return default
            if not strict:
                return ""
            raise ConfigError(
                f"{where} uses ${{{name}}} but the environment variable {name} is not set: "
                f"set it, or write ${{{name}:-default}} to give a default"
            )

        return (_GEMINI_VAR if bare else _VAR).sub(substitute, value)
    if isinstance(value, dict):
        return {
            k: _expand(v, environ, f"{where}.{k}", expanded, places, strict=strict, bare=bare) for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            _expand(v, environ, f"{where}.{i}", expanded, places, strict=strict, bare=bare) for i, v in enumerate(value)
        ]
    return value


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for variable, key in ENV_KEYS.items():
        if environ.get(variable):
            value: Any = environ[variable]
            if variable in ENV_LISTS:
                value = [item.strip() for item in value.split(",") if item.strip()]
            _deep_merge(layer, _nested(key, value))
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
