"""The configuration's pydantic models: what a valid config is, with camelCase keys on the wire.

Validation errors become `ConfigError` in `sources.ConfigSources.resolve`.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, field_validator, model_validator

from agentify._common.uris import forms
from agentify.config.base import Model
from agentify.config.server import ServerConfig
from agentify.security.credentials import argument_secrets, header_credential, is_credential, mask_url, url_secrets

BACKEND_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PERSONAL = re.compile(r"\$\{person:([^}$]{0,100})\}")  # bounded, so its search is linear on any text
_PERSONAL_MARK = "${person:"
"""`${person:NAME}` in a backend's `env`: each person's own secret NAME, asked on the gateway's page."""
_PERSONAL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
LogLevel = Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"]
DEFAULT_MODEL = "gpt-5.4-mini"
Exposed = Literal["orchestrate", "search", "tools"]
EXPOSED: tuple[Exposed, ...] = ("orchestrate", "search")  # the default; "tools" is asked for


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


class ToolOverride(Model):
    """How the gateway shows one backend tool: renamed, described anew, some arguments fixed."""

    name: str | None = Field(default=None, description="The name the planner and the IDE see.")
    description: str | None = Field(default=None, description="The description the planner and the IDE see.")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Fixed argument values: removed from the input schema, sent with every call, never changed.",
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_NAME.match(value):
            raise ValueError(f"{value!r} is not a valid tool name: use 1-64 of the characters a-z A-Z 0-9 _ . -")
        return value


class ToolFilter(Model):
    """Which tools of a backend are offered and how; every name here is the backend's own name for the tool."""

    allow: list[str] | None = Field(default=None, description="Only these tools are offered (None: all).")
    deny: list[str] = Field(default_factory=list, description="These tools are never offered nor called.")
    confirm: list[str] = Field(default_factory=list, description="These tools run only after the user confirms.")
    auto_approve: list[str] = Field(
        default_factory=list,
        description="These tools run without asking even when their server marks them destructive "
        "(Cline's autoApprove); tools.confirm still asks.",
    )
    overrides: dict[str, ToolOverride] = Field(default_factory=dict, description="Tools shown renamed or pinned.")

    def permits(self, tool: str) -> bool:
        return tool not in self.deny and (self.allow is None or tool in self.allow)

    @model_validator(mode="after")
    def _distinct_names(self) -> ToolFilter:
        """Two tools may not be shown under one name: a rename onto another overridden tool that keeps its own
        name, or two renames onto one name. (A rename onto a tool the config does not name is found when the
        backend lists its tools.)"""
        shown: dict[str, str] = {}
        for tool, override in self.overrides.items():
            name = override.name or tool
            if name in shown:
                raise ValueError(
                    f"overrides show both {shown[name]!r} and {tool!r} as {name!r}: give one of them another name"
                )
            shown[name] = tool
        return self


class ItemFilter(Model):
    """Which resources or prompts of a backend the IDE sees; `*` globs match any run of characters."""

    allow: list[str] | None = Field(default=None, description="Only what matches one of these (None: all).")
    deny: list[str] = Field(default_factory=list, description="What matches one of these is never listed nor read.")

    def permits(self, *keys: str | None) -> bool:
        """Whether an item known by `keys` (a resource's URI and name, a prompt's name) is offered: no key is
        denied, and with `allow`, some key is allowed."""
        named = [k for k in keys if k]
        if any(_matches(k, self.deny) for k in named):
            return False
        return self.allow is None or any(_matches(k, self.allow) for k in named)

    def permits_resource(self, uri: str, name: str | None) -> bool:
        """`permits` for a resource (or template), its URI compared in every form a backend may read it in
        (`_common/uris.py`): denied when any form matches a deny, allowed when every form matches an allow
        (or the name does)."""
        uri_forms = forms(uri)
        if any(_matches_uri(f, self.deny) for f in uri_forms) or (name and _matches(name, self.deny)):
            return False
        if self.allow is None:
            return True
        return all(_matches_uri(f, self.allow) for f in uri_forms) or bool(name and _matches(name, self.allow))


def _matches(key: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(key, pattern) for pattern in patterns)


def _matches_uri(uri_form: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(uri_form, form) for pattern in patterns for form in forms(pattern))


class BearerSettings(Model):
    type: Literal["bearer"]
    token: str = Field(min_length=1, repr=False)
    """The bearer token sent to the backend; use `${VAR}` rather than the token itself."""


class OAuthSettings(Model):
    type: Literal["oauth"]
    client_id: str | None = None
    """A client id registered with the server; unset: dynamic client registration."""
    client_secret: str | None = Field(default=None, repr=False)
    """The client secret of a confidential client."""
    scopes: list[str] | None = None
    """The scopes to ask for; unset: what the server advertises."""
    client_metadata_url: str | None = None
    """The HTTPS URL of a client metadata document you publish (a Client ID Metadata Document, whose URL is
    the client id): used where the authorization server supports them; elsewhere the client registers."""
    per_principal: bool = False
    """Each principal of a team gateway authorizes as themselves (a URL opened from their IDE), and the backend
    sees that person's own tokens, kept in the vault (`AGENTIFY_VAULT_KEY`), instead of one shared identity."""

    @field_validator("client_metadata_url")
    @classmethod
    def _check_metadata_url(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme != "https" or urlsplit(value).path in ("", "/")):
            # The SDK's rule (the URL is the client id the authorization server fetches).
            raise ValueError(f"{value!r} is not an https:// URL with a path, as a client metadata document's must be")
        return value


class ExchangeSettings(Model):
    """Each principal's own token (a JWT of `server.auth` type `jwt`) exchanged at the backend's authorization
    server for one meant for the backend (RFC 8693 token exchange); the token itself never leaves agentify."""

    type: Literal["exchange"]
    client_id: str | None = None
    """agentify's client id at the backend's authorization server, if it asks clients to authenticate."""
    client_secret: str | None = Field(default=None, repr=False)
    """Its client secret (HTTP basic authentication at the token endpoint)."""
    scopes: list[str] | None = None
    """The scopes to ask for; unset: what the authorization server grants by default."""


Transport = Literal["streamable-http", "sse"]
Protocol = Literal["auto", "2025-11-25", "2026-07-28"]
"""How a backend session opens: `auto` probes `server/discover` and falls back to `initialize` (the SDK's
auto mode); a version pins that era (`2025-11-25` is the one where a backend can ask by request)."""


class BackendConfig(Model):
    id: str
    """Unique, `^[a-zA-Z0-9_-]{1,64}$`; tools are offered to the model as `<id>__<tool>`."""
    command: str | None = Field(default=None, min_length=1)
    """How to start a local stdio MCP server (a backend has either `command` or `url`)."""
    url: str | None = Field(default=None, min_length=1)
    """A remote MCP server (streamable HTTP or SSE) instead of a command."""
    transport: Transport | None = None
    """Unset: streamable HTTP with SSE fallback (a URL ending in `/sse` means SSE)."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """HTTP headers sent to a remote backend, `${VAR}` expanded; values are secrets."""
    auth: BearerSettings | OAuthSettings | ExchangeSettings | None = Field(default=None, discriminator="type")
    """How agentify authenticates to a remote backend: a bearer token or OAuth (`agentify auth <id>`)."""
    start: Literal["eager", "lazy"] = "eager"
    """`eager`: started with the gateway; `lazy`: by the first call that needs it, planned from its tool manifest."""
    idle_stop_seconds: float | None = Field(default=None, gt=0)
    """Stop the backend after this long without calls; the next call starts it again. Unset: never."""
    max_sessions: int = Field(default=4, ge=1, le=64)
    """At most this many sessions of the backend at once (for a command, processes), each carrying one call at a
    time, so that what the backend says during a call (questions, logs) is that call's; a call that finds them all
    busy waits for one, at most `timeoutSeconds`. Extra sessions start when calls overlap and stop when idle."""
    max_people: int | None = Field(default=None, ge=1, le=4096)
    """A backend run as each person (`${person:NAME}` in its `env`, or `auth.perPrincipal`): at most this many people
    have processes or a session of it at once (per replica); the least recently used with nothing in flight makes
    room. Unset: 32 for a command, 256 for a url."""
    forward_roots: bool = False
    """Answer the backend's `roots/list` with the IDE's workspace roots and tell it when they change."""
    protocol: Protocol = "auto"
    """The MCP era spoken to the backend: `auto` (discover, else initialize; falls back to 2025-11-25 when the
    backend asks by request), `2025-11-25` or `2026-07-28`."""
    args: list[str] = Field(default_factory=list)
    """The command's arguments."""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Extra environment of the backend; values are secrets. What else it gets: see `inheritEnv`. A value
    `${person:NAME}` is each person's own secret NAME (a personal access token): every person is asked for
    theirs on the gateway's page (URL-mode elicitation), it is kept in the vault, and each person's calls run
    on a process of their own with it."""
    inherit_env: bool | list[str] | None = None
    """Which of the gateway's environment variables the backend also gets. Unset: the top-level `inheritEnv`.
    `false`: only HOME, LOGNAME, PATH, SHELL, TERM, USER and the proxy, CA-certificate and locale variables
    (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY and their lower-case forms, SSL_CERT_FILE, SSL_CERT_DIR,
    REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, LANG, LANGUAGE, LC_*); a list: those too, and these names
    (`AWS_*` globs allowed); `true`: every variable, API keys included."""
    cwd: str | None = None
    """Working directory, relative to the config file. Unset: the config file's folder."""
    description: str = ""
    """Shown to the planner next to each tool."""
    timeout_seconds: float = Field(default=60.0, gt=0)
    """The limit of one tool call; the call is cancelled at the backend when it is hit."""
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    """The limit for `initialize` + `tools/list`, and for a call waiting on a starting backend."""
    enabled: bool = True
    """`false` keeps the backend configured but off."""
    allow_destructive: bool = False
    """`true`: tools the server marks destructive run without asking."""
    tools: ToolFilter = Field(default_factory=ToolFilter)
    """Which tools are offered, never offered, or run only after you confirm."""
    resources: ItemFilter = Field(
        default_factory=ItemFilter, description="Resource URIs or names (`*` globs) the IDE may list and read."
    )
    prompts: ItemFilter = Field(
        default_factory=ItemFilter, description="Prompt names (as the backend gives them, `*` globs) the IDE may get."
    )

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not BACKEND_ID.match(value):
            raise ValueError(f"{value!r} is not a valid backend id: use 1-64 of the characters a-z A-Z 0-9 _ -")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"{mask_url(value)!r} is not an http:// or https:// URL")
        if parts.username is not None or parts.password is not None:
            # The HTTP client would turn them into Basic auth on its own, sent wherever the URL leads.
            raise ValueError(
                f"{mask_url(value)!r} holds a user name or password, which agentify never sends: give the "
                'credential as a header ("headers": {"Authorization": "Basic ${CREDENTIAL}"}) or as "auth"'
            )
        return value

    @model_validator(mode="after")
    def _command_or_url(self) -> BackendConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"backend {self.id!r} needs exactly one of command (a local stdio server) or url (a remote server)"
            )
        if self.url is None and (self.transport or self.headers or self.auth):
            raise ValueError(f"backend {self.id!r}: transport, headers and auth apply to url backends only")
        self._check_personal()
        if self.max_people is not None and not self.per_person:
            raise ValueError(
                f"backend {self.id!r}: maxPeople applies only to a backend run as each person (${{person:NAME}} in "
                'its env, or "auth" perPrincipal or exchange); remove it, or use maxSessions for its processes'
            )
        return self

    def _check_personal(self) -> None:
        """`${person:NAME}` only in `env` values, with a name of letters, digits and `_`."""
        elsewhere = [*self.args, *self.headers.values(), self.url or "", self.command or "", self.cwd or ""]
        if any(_PERSONAL_MARK in value for value in elsewhere):
            raise ValueError(
                f"backend {self.id!r}: ${{person:NAME}} (a person's own secret) is taken in env values only; "
                "put it in an environment variable of the backend and have its args or command read that"
            )
        for variable, value in self.env.items():
            names = PERSONAL.findall(value)
            if value.count(_PERSONAL_MARK) != len(names):
                raise ValueError(
                    f"backend {self.id!r}: env {variable} has a ${{person: that no }} closes after a name: write "
                    "${person:NAME} with 1-64 of the characters A-Z a-z 0-9 _"
                )
            for name in names:
                if not _PERSONAL_NAME.match(name):
                    raise ValueError(
                        f"backend {self.id!r}: env {variable} names a person's secret {name[:80]!r}, which is not a "
                        "valid name: write ${person:NAME} with 1-64 of the characters A-Z a-z 0-9 _, not starting "
                        "with a digit"
                    )

    @property
    def personal_secrets(self) -> tuple[str, ...]:
        """The names of the secrets each person gives for themselves (`${person:NAME}` in `env`), in order."""
        names = (name for value in self.env.values() for name in PERSONAL.findall(value))
        return tuple(dict.fromkeys(names))

    @property
    def per_person(self) -> bool:
        """Whether each person has processes or a session of their own (what `maxPeople` bounds)."""
        by_oauth = isinstance(self.auth, OAuthSettings) and self.auth.per_principal
        return bool(self.personal_secrets) or by_oauth or isinstance(self.auth, ExchangeSettings)

    @property
    def remote(self) -> bool:
        return self.url is not None

    @property
    def oauth(self) -> bool:
        return isinstance(self.auth, OAuthSettings)

    def secret_values(self) -> list[str]:
        """This backend's credentials: every header value, the bearer token, the client secret, a URL's
        password and secret-looking query values, env values that are credentials (by name or look), and
        the values of secret arguments (`--api-key VALUE`, `TOKEN=VALUE`)."""
        values = [v for k, v in self.env.items() if is_credential(k, v)]
        values.extend(argument_secrets(self.args))
        values.extend(self.headers.values())
        values.extend(c for c in map(header_credential, self.headers.values()) if c)
        if isinstance(self.auth, BearerSettings):
            values.append(self.auth.token)
        elif isinstance(self.auth, OAuthSettings | ExchangeSettings) and self.auth.client_secret:
            values.append(self.auth.client_secret)
        values.extend(url_secrets(self.url))
        return values

    @property
    def problem(self) -> str | None:
        """Why the backend cannot start as configured (a variable it uses is not set); None: it can."""
        return self._problem

    _problem: str | None = PrivateAttr(default=None)

    def where(self) -> str:
        """How the backend is reached, for people: the command, or the URL with its secrets masked."""
        return mask_url(self.url) if self.url else " ".join([self.command or "", *self.args])


class PlannerConfig(Model):
    provider: Literal["auto", "openai", "sampling", "offline"] = "auto"
    """`auto`: openai with a key, else sampling when the IDE offers it, else offline."""
    model: str = DEFAULT_MODEL
    """The chat model of the openai planner."""
    base_url: str | None = None
    """Any OpenAI-compatible endpoint: Azure, Ollama (`http://localhost:11434/v1`), vLLM, LM Studio. Unset: OpenAI."""
    api_key: str | None = Field(default=None, repr=False)
    """The API key (prefer `OPENAI_API_KEY` in the environment)."""
    timeout_seconds: float = Field(default=60.0, gt=0)
    """The limit of one request to the model."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """Retries of a request on 429 (honouring `Retry-After`), 5xx, connection errors and timeouts, with backoff."""
    shortlist: int = Field(default=24, ge=1)
    """A model planner is offered at most this many tools (the best-ranked for the task)."""


class OtelConfig(Model):
    capture_content: bool = Field(
        default=False,
        description="Export task input, tool arguments and results on spans (redacted, cut); off: they stay local.",
    )


class Config(Model):
    backends: list[BackendConfig] = Field(default_factory=list)
    """agentify's own list of backend MCP servers (besides, or instead of, an `mcpServers` map)."""
    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    """Which planner picks the tool, and its model."""
    debug_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve the debug console on this port (0: any free port). Unset: off."""
    debug_host: str = "127.0.0.1"
    """The address the console binds; anything but 127.0.0.1 is warned about."""
    log_level: LogLevel = "INFO"
    """The level of the log on stderr (and in the console)."""
    inherit_env: bool | list[str] = False
    """What every backend gets of the gateway's environment, unless it says `inheritEnv` itself: `false`
    (the default) passes only the safe set (see the backend's `inheritEnv`), a list adds those names, `true`
    passes everything."""
    trace_file: str | None = None
    """Append every task's trace as a JSON line (created 0600; relative to the config file). Unset: off."""
    otel: OtelConfig = Field(default_factory=OtelConfig)
    """OpenTelemetry export: whether spans carry the task's content."""
    max_query_chars: int = Field(default=20_000, ge=1)
    """Longer queries are refused as `invalid_input`."""
    max_context_chars: int = Field(default=20_000, ge=100)
    """`context.selectionText` beyond this is cut, with a note saying how long it was."""
    max_result_chars: int = Field(default=1_000_000, ge=1000)
    """Text of a backend result beyond this is cut, with a note saying how much."""
    confirm_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="How long a confirmation (and any question to the client) waits for its answer; "
        "in the 2026-07-28 protocol, how long its sealed round-trip state stays valid.",
    )
    server: ServerConfig = Field(
        default_factory=ServerConfig, description="How `serve --transport http` serves a team (auth, limits)."
    )
    expose: list[Exposed] = Field(
        default_factory=lambda: list(EXPOSED),
        min_length=1,
        description="Which tools the IDE sees: orchestrate (orchestrate_task, plan_task, list_backends), "
        "search (search_tools, call_tool) and tools (every backend tool, listed directly).",
    )
    listed_tools: list[str] = Field(
        default_factory=list,
        description="Backend tools listed directly beside search_tools and call_tool, by their name "
        "'<backend>__<tool>' as search_tools gives it: the few an agent needs all the time.",
    )
    pinning: Literal["off", "warn", "enforce"] = Field(
        default="warn",
        description="Pinned tool definitions: a backend tool that changes, is added after the backend's first "
        "listing, or whose description speaks to the model as an instruction or names another backend's tool is "
        "withheld until approved (enforce), flagged and logged (warn), or trusted (off). See `agentify pins`.",
    )
    prefix: bool = Field(
        default=True,
        description="List each backend prompt, and with expose tools each backend tool, as <backend>__<name> "
        "(true), or under its own name where no other backend's has it (false).",
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
        exchanging = [b.id for b in self.backends if isinstance(b.auth, ExchangeSettings)]
        if exchanging and self.server.auth.type != "jwt":
            raise ValueError(
                f"backend {exchanging[0]!r} has auth type exchange, which exchanges each person's own token (a JWT): "
                'it needs server.auth type "jwt"'
            )
        if unknown := sorted(set(self.server.limits.per_backend) - seen):
            raise ValueError(
                f"server.limits.perBackend names {', '.join(map(repr, unknown))}, which is no backend id of this "
                "config: use the ids of the backends list"
            )
        return self

    def secrets(self) -> list[str]:
        """What every sink masks (logs, traces, the console, results): the API key, every value that came
        from `${VAR}`, and each backend's credentials (`BackendConfig.secret_values`).
        `NODE_ENV=production` is not a secret: masking it would blank the word out of every log line."""
        values = [self.planner.api_key or "", *self._expanded, *self.server.secret_values()]
        for backend in self.backends:
            values.extend(backend.secret_values())
        return sorted({v for v in values if v})

    _expanded: frozenset[str] = PrivateAttr(default_factory=frozenset)
