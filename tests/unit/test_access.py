"""`server.access` decided in process: rules over principals, groups and scopes, patterns over backends and
tools, deny over allow, default deny, and Cedar policies (conditions on arguments, a forbid that cannot be
evaluated, a bad file named by its line, a changed file read again)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from agentify.config.server import AccessConfig, ServerConfig
from agentify.errors import ConfigError, Forbidden
from agentify.team.access import Access, AccessGate, tool_target
from agentify.team.bearer import JWT_CLAIMS, TOKENS_FILE_GROUPS, who_of
from agentify.team.policy import Policy, PolicyError, Target
from agentify.team.principal import Who, acting_for, current_who

ALICE = Who("alice", frozenset({"qa"}))
BOB = Who("bob", scopes=frozenset({"tools:read"}))
WRITE = tool_target("filesystem", "filesystem__write_file", "write_file")
READ = tool_target("filesystem", "filesystem__read_file", "read_file")
ECHO = tool_target("fake", "fake__echo", "echo")
RESOURCE = Target("read", "Resource", "demo://notes", "fake", "demo://notes")


def access(*rules: dict[str, Any], policy: Policy | None = None) -> Access:
    return Access(AccessConfig.model_validate({"rules": list(rules)}), policy)


def may(decider: Access, who: Who, target: Target, arguments: dict[str, Any] | None = None) -> bool:
    try:
        decider.check(target, {"arguments": arguments or {}}, who)
    except Forbidden:
        return False
    return True


def test_without_access_everyone_may_use_everything() -> None:
    decider = Access(None)
    assert may(decider, ALICE, WRITE) and decider.shows(WRITE, ALICE) and not decider.active


def test_with_access_what_no_rule_allows_is_refused() -> None:
    decider = access({"principals": ["alice"], "allow": ["fake"]})
    assert may(decider, ALICE, ECHO) and may(decider, ALICE, RESOURCE)
    assert not may(decider, ALICE, READ) and not may(decider, BOB, ECHO)
    assert not decider.shows(READ, ALICE) and not decider.shows(ECHO, BOB)


def test_a_tool_pattern_allows_those_tools_and_a_deny_beats_an_allow() -> None:
    decider = access(
        {"principals": ["*"], "allow": ["filesystem__read_*"]},
        {"principals": ["group:qa"], "allow": ["filesystem"], "deny": ["filesystem__write_*"]},
    )
    assert may(decider, BOB, READ) and not may(decider, BOB, WRITE)
    assert may(decider, ALICE, READ) and not may(decider, ALICE, WRITE)
    # The backend pattern reaches what it offers besides tools; a tool pattern does not.
    files = Target("read", "Resource", "file:///srv/a", "filesystem", "file:///srv/a")
    assert may(decider, ALICE, files) and not may(decider, BOB, files)


def test_a_rule_names_a_principal_by_name_group_scope_or_everyone() -> None:
    decider = access(
        {"principals": ["scope:tools:read"], "allow": ["fake"]},
        {"principals": ["group:qa"], "allow": ["filesystem__read_file"]},
    )
    assert may(decider, BOB, ECHO) and not may(decider, BOB, READ)
    assert may(decider, ALICE, READ) and not may(decider, ALICE, ECHO)
    assert not may(decider, Who("carol"), ECHO)


def test_the_refusal_names_the_principal_the_item_and_the_setting() -> None:
    decider = access({"principals": ["alice"], "allow": ["fake"]})
    with pytest.raises(Forbidden) as refused:
        decider.check(WRITE, {"arguments": {}}, ALICE)
    assert refused.value.message == "'alice' may not use filesystem__write_file (server.access)"
    assert refused.value.code == "forbidden"


def test_the_request_s_principal_is_asked_about_and_local_outside_a_request() -> None:
    decider = access({"principals": ["local"], "allow": ["fake"]})
    assert current_who() == Who("local") and decider.shows(ECHO)
    with acting_for("alice", groups=frozenset({"qa"})):
        assert current_who() == ALICE and not decider.shows(ECHO)


def test_access_config_refuses_unknown_keys_and_empty_principals() -> None:
    with pytest.raises(ValueError, match="rule"):
        ServerConfig.model_validate({"access": {"rules": [{"principals": ["alice"], "rule": ["x"]}]}})
    with pytest.raises(ValueError, match="names no principal"):
        AccessConfig.model_validate({"rules": [{"principals": ["group:"], "allow": ["x"]}]})
    with pytest.raises(ValueError, match="not a backend id"):
        AccessConfig.model_validate({"rules": [{"principals": ["a"], "allow": ["fs/../x"]}]})


POLICY = """// what rules cannot say
permit(principal in Group::"qa", action == Action::"call", resource in Backend::"filesystem");

forbid(principal, action == Action::"call", resource == Tool::"filesystem__write_file")
  when { context.arguments.path like "*secret*" };
"""


def test_a_cedar_forbid_refuses_a_call_by_its_arguments_and_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.cedar"
    path.write_text(POLICY)
    decider = access(policy=Policy.load(path))
    assert may(decider, ALICE, WRITE, {"path": "/srv/notes.txt"})
    with pytest.raises(Forbidden) as refused:
        decider.check(WRITE, {"arguments": {"path": "/srv/secret.txt"}}, ALICE)
    assert "(server.access.policyFile, policy.cedar line 4)" in refused.value.message
    # Leaving the argument out does not skip the forbid: a forbid that cannot be evaluated forbids.
    assert not may(decider, ALICE, WRITE, {})
    # Shown: it could be used with other arguments. Bob has no permit at all.
    assert decider.shows(WRITE, ALICE) and not decider.shows(WRITE, BOB)


def test_rules_and_policy_combine_and_a_forbid_of_either_wins(tmp_path: Path) -> None:
    path = tmp_path / "policy.cedar"
    path.write_text('forbid(principal == Principal::"alice", action, resource == Tool::"fake__echo");')
    decider = access({"principals": ["*"], "allow": ["fake"]}, policy=Policy.load(path))
    assert not may(decider, ALICE, ECHO) and not decider.shows(ECHO, ALICE)
    assert may(decider, BOB, ECHO)


def test_arguments_cedar_has_no_value_for_are_carried_as_they_can_be(tmp_path: Path) -> None:
    path = tmp_path / "policy.cedar"
    path.write_text(
        'permit(principal, action, resource) when { context.arguments has n && context.arguments.n == "1.5" '
        '&& !(context.arguments has gone) && context.arguments.big == "99999999999999999999" };'
    )
    decider = access(policy=Policy.load(path))
    arguments = {"n": 1.5, "gone": None, "big": 99999999999999999999, "__entity": {"type": "Principal", "id": "x"}}
    assert may(decider, ALICE, ECHO, arguments)


@pytest.mark.parametrize(
    ("source", "where", "what"),
    [
        ("permit(principal, action, resource);\n\nforbid(principal, action, resource)\nwhen {\n x ==\n};", 6, "token"),
        ('permit(principal, action == Action::"write", resource);', 1, "there is no action 'write'"),
        ('\n\npermit(principal == User::"a", action, resource);', 3, "there is no entity type 'User'"),
        ("permit(principal, action, resource)", 1, "unexpected end of input"),
    ],
)
def test_a_bad_policy_file_is_named_with_its_line(tmp_path: Path, source: str, where: int, what: str) -> None:
    path = tmp_path / "policy.cedar"
    path.write_text(source)
    with pytest.raises(PolicyError) as bad:
        Policy.load(path)
    assert f"{path} line {where}: " in str(bad.value) and what in str(bad.value)


def test_the_gate_refuses_a_bad_policy_at_start_and_keeps_the_last_good_one_after(tmp_path: Path) -> None:
    path = tmp_path / "policy.cedar"
    path.write_text("permit(principal, action, resource")
    config = AccessConfig.model_validate({"rules": [], "policyFile": str(path)})
    with pytest.raises(ConfigError, match="policy.cedar line 1"):
        AccessGate(config)
    path.write_text('forbid(principal, action, resource == Tool::"fake__echo");permit(principal, action, resource);')
    gate = AccessGate(config)
    assert not may(gate.current, BOB, ECHO) and may(gate.current, BOB, READ)
    path.write_text("permit(principal, action, resource);")
    os.utime(path, ns=(1, 1))  # a change the stat sees even within one clock tick
    assert may(gate.current, BOB, ECHO)
    path.write_text("forbid(principal, action, resource")
    os.utime(path, ns=(2, 2))
    assert may(gate.current, BOB, ECHO)  # the broken file is not applied
    gate.configure(AccessConfig.model_validate({"rules": [{"principals": ["bob"], "allow": ["fake"]}]}))
    assert may(gate.current, BOB, ECHO) and not may(gate.current, BOB, READ)
    gate.configure(None)
    assert not gate.current.active


class _Request:
    def __init__(self, token: AccessToken | None) -> None:
        self.scope = {"user": AuthenticatedUser(token)} if token is not None else {}


@pytest.mark.parametrize(
    ("claims", "groups"),
    [
        ({TOKENS_FILE_GROUPS: ["qa", "ops"]}, {"qa", "ops"}),  # the tokens file's, whatever groupsClaim says
        ({"iss": "x", JWT_CLAIMS: {"roles": ["qa", 7, ""]}}, {"qa"}),
        ({"iss": "x", JWT_CLAIMS: {"roles": "qa  ops"}}, {"qa", "ops"}),  # a space-separated string
        ({"iss": "x", JWT_CLAIMS: {"groups": ["qa"]}}, set()),  # another claim than groupsClaim
        ({"iss": "x", JWT_CLAIMS: {"roles": ["qa"]}, TOKENS_FILE_GROUPS: ["admin"]}, {"qa"}),  # a JWT's own only
    ],
)
def test_a_principal_s_groups_come_from_the_tokens_file_or_the_jwt_claim(
    claims: dict[str, Any], groups: set[str]
) -> None:
    token = AccessToken(token="t", client_id="c", scopes=["files:read"], subject="alice", claims=claims)
    who = who_of(_Request(token), "anonymous", "roles")
    assert who == Who("alice", frozenset(groups), frozenset({"files:read"}))
    assert who_of(_Request(None), "anonymous", "roles") == Who("anonymous")
