"""`server.access`: what each principal may use (DESIGN.md, "Who may do what").

A rule names principals (a name, `group:<name>`, `scope:<name>` or `*`) and patterns (a backend id:
everything it offers; a tool as the gateway names it, `<backend>__<tool>`; `*` and `?` globs). A
principal may use an item when a rule naming it allows the item, or a permit of the Cedar policy
(`policy.py`) applies, and no rule naming it denies the item and no forbid of the policy applies.
With `access` present, what nothing allows is refused; without it, everything is allowed.

`Access` is one immutable decision set (rules and policy); `AccessGate` holds the current one and
follows the config (`configure`) and the policy file (read again when it changes). The gateway asks
it two things, for the principal of the request (`principal.current_who`): `check` (may it use this,
with these arguments: raises `Forbidden`) and `shows` (may it be shown this, in any list).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loguru import logger

from agentify.config.server import AccessConfig, AccessRule
from agentify.errors import ConfigError, Forbidden
from agentify.team.audit import trust_changed
from agentify.team.policy import Policy, PolicyError, Target, stamp_of
from agentify.team.principal import Who, current_who

MAX_CACHED = 50_000
ACCESS_KEY, POLICY_KEY = "server.access", "server.access.policyFile"
_VERBS = {"call": "use", "read": "read", "prompt": "use the prompt", "complete": "complete arguments of"}


def tool_target(backend: str, name: str, own: str) -> Target:
    """A backend tool: `name` as the gateway names it (`<backend>__<tool>`), `own` as the backend does."""
    return Target("call", "Tool", name, backend, own)


class _Rule:
    def __init__(self, rule: AccessRule) -> None:
        self.everyone = "*" in rule.principals
        self.names = frozenset(p for p in rule.principals if ":" not in p)
        self.groups = frozenset(p.removeprefix("group:") for p in rule.principals if p.startswith("group:"))
        self.scopes = frozenset(p.removeprefix("scope:") for p in rule.principals if p.startswith("scope:"))
        self.allow = _patterns(rule.allow)
        self.deny = _patterns(rule.deny)

    def names_who(self, who: Who) -> bool:
        return self.everyone or who.name in self.names or bool(self.groups & who.groups or self.scopes & who.scopes)


def _patterns(patterns: list[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None


def _matches(pattern: re.Pattern[str] | None, target: Target) -> bool:
    """A pattern names a backend (everything it offers) or, for a tool, the tool by its gateway name."""
    if pattern is None:
        return False
    if pattern.match(target.backend):
        return True
    return target.kind == "Tool" and bool(pattern.match(target.id) or pattern.match(f"{target.backend}__{target.name}"))


class Access:
    """One decision set: `rules` (None: `access` is not configured, all is allowed) and the Cedar `policy`."""

    def __init__(self, config: AccessConfig | None, policy: Policy | None = None) -> None:
        self.config = config
        self.policy = policy
        self._rules = [_Rule(rule) for rule in config.rules] if config is not None else []
        self._shown: dict[tuple[Who, Target], bool] = {}

    @property
    def active(self) -> bool:
        return self.config is not None

    def check(self, target: Target, context: Mapping[str, Any] | None = None, who: Who | None = None) -> None:
        """Raises Forbidden when `who` (the request's principal) may not use `target` with `context` (the call's
        arguments as `{"arguments": ...}`, a read's `{"uri": ...}`)."""
        if self.config is None:
            return
        who = who or current_who()
        why = self._refusal(who, target, dict(context or {}))
        if why is not None:
            raise Forbidden(f"{who.name!r} may not {_VERBS[target.action]} {target.id} ({why})")

    def shows(self, target: Target, who: Who | None = None) -> bool:
        """Whether `who` may be shown `target`: it could use it with some arguments."""
        if self.config is None:
            return True
        who = who or current_who()
        key = (who, target)
        shown = self._shown.get(key)
        if shown is None:
            if len(self._shown) >= MAX_CACHED:
                self._shown.clear()
            shown = self._shown[key] = self._refusal(who, target, None) is None
        return shown

    def visible(self, targets: Iterable[Target], who: Who | None = None) -> list[Target]:
        who = who or current_who()
        return [t for t in targets if self.shows(t, who)]

    def shows_backend(self, backend: str, tools: Iterable[Target], who: Who | None = None) -> bool:
        """A backend is shown when the principal may use it as a whole, or any of its tools."""
        if self.config is None:
            return True
        who = who or current_who()
        whole = Target("read", "Backend", backend, backend, backend)
        return self._by_rules(who, whole) == (True, False) or any(self.shows(t, who) for t in tools)

    def _by_rules(self, who: Who, target: Target) -> tuple[bool, bool]:
        allowed = denied = False
        for rule in self._rules:
            if rule.names_who(who):
                allowed = allowed or _matches(rule.allow, target)
                denied = denied or _matches(rule.deny, target)
        return allowed, denied

    def _refusal(self, who: Who, target: Target, context: dict[str, Any] | None) -> str | None:
        """Why `who` may not use `target` (None: it may). `context` None: deciding what it is shown."""
        allowed, denied = self._by_rules(who, target)
        if denied:
            return "server.access"
        if self.policy is not None and target.kind != "Backend":
            verdict = self.policy.decide(who, target, context)
            if verdict.forbidden_by is not None:
                return f"server.access.policyFile, {verdict.forbidden_by}"
            allowed = allowed or verdict.permitted
        return None if allowed else "server.access"


class AccessGate:
    """The `Access` in force: replaced when the config's `access` changes or the policy file does."""

    def __init__(self, config: AccessConfig | None) -> None:
        """Raises ConfigError: the policy file cannot be used (its message names the file and line)."""
        try:
            self._access = Access(config, _policy(config))
        except PolicyError as exc:
            raise ConfigError(f"server.access.policyFile: {exc}") from None
        self._problem: str | None = None
        self.listeners: list[Callable[[], None]] = []
        """Called (never blocking) once new rules or a new policy are in force: what principals see changed."""

    @property
    def current(self) -> Access:
        """The decision set for this request (the policy file is read again when it changed)."""
        access = self._access
        policy = access.policy
        if policy is not None and stamp_of(policy.path) != policy.stamp:
            self._reload(access.config, because=f"the policy file {policy.path} changed", what=POLICY_KEY)
        return self._access

    def configure(self, config: AccessConfig | None) -> None:
        """A reloaded config: applied when its `access` differs; a bad policy file keeps what is in force."""
        if config != self._access.config:
            self._reload(config, because="server.access changed")

    def _reload(self, config: AccessConfig | None, *, because: str, what: str = ACCESS_KEY) -> None:
        try:
            access = Access(config, _policy(config))
        except PolicyError as exc:
            if f"{because}: {exc}" != self._problem:
                logger.error("{}, but the access rules in force stay: {}", because, exc)
            self._problem = f"{because}: {exc}"
            if self._access.policy is not None:  # not read again until it changes once more
                self._access.policy.stamp = stamp_of(self._access.policy.path) or (0, 0, 0)
            return
        self._problem = None
        self._access = access
        # A change of trust in the audit: whoever edited the config or the policy, the gateway noticed it.
        trust_changed("access_reloaded", what, _in_force(access), principal="agentify")
        for listener in self.listeners:
            listener()
        rules = len(config.rules) if config is not None else 0
        policies = f", {access.policy.count} Cedar policies" if access.policy is not None else ""
        logger.info("{}: access applied ({} rules{})", because, rules, policies if config else "; all allowed")


def _in_force(access: Access) -> dict[str, Any]:
    """The rules and the policies now in force, as the audit hashes them."""
    config = access.config.model_dump(mode="json", by_alias=True) if access.config is not None else None
    policies = None
    if access.policy is not None:
        try:  # the file as read just now: small, and read once per change
            policies = hashlib.sha256(access.policy.path.read_bytes()).hexdigest()
        except OSError:
            policies = "unreadable"
    return {"access": config, "policyFileSha256": policies}


def _policy(config: AccessConfig | None) -> Policy | None:
    if config is None or config.policy_file is None:
        return None
    return Policy.load(Path(config.policy_file))
