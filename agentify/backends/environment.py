"""The environment a backend process starts with.

By default a backend gets what the MCP SDK passes (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus the
variables without which a backend behind a proxy or a company CA cannot reach the network, or cannot
read and write text in the user's language (`PASSED`), plus its own `env`. Everything else of the
gateway's environment (API keys, cloud credentials) stays out unless the config asks for it with
`inheritEnv`: `true` passes all of it, a list passes those names (`AWS_*` globs allowed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from fnmatch import fnmatchcase

from mcp.client.stdio import get_default_environment

from agentify.config.itself import PARENT_VARIABLE
from agentify.config.models import PERSONAL

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")
PASSED = (
    *_PROXIES,
    *(name.lower() for name in _PROXIES),
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "LANG",
    "LANGUAGE",
    "LC_*",
)
"""What every backend gets from the gateway's environment, whatever `inheritEnv` says."""


def backend_environment(
    own: Mapping[str, str], inherit: bool | list[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a backend whose config says `env: own` and `inheritEnv: inherit`; the backend's
    own values win, and `PARENT_VARIABLE` (the gateway's pid) is always set (see config/itself.py)."""
    environ = os.environ if environ is None else environ
    if inherit is True:
        passed = dict(environ)
    else:
        patterns = [*PASSED, *(inherit or [])]
        passed = {k: v for k, v in environ.items() if any(fnmatchcase(k, p) for p in patterns)}
    return get_default_environment() | passed | dict(own) | {PARENT_VARIABLE: str(os.getpid())}


def personal_env(own: Mapping[str, str], secrets: Mapping[str, str] | None) -> dict[str, str]:
    """`own` with each `${person:NAME}` replaced by the person's secret NAME (empty without one: a process started
    for nobody in particular, as `doctor` starts it, gets no placeholder)."""
    values = secrets or {}
    return {key: PERSONAL.sub(lambda match: values.get(match.group(1), ""), value) for key, value in own.items()}
