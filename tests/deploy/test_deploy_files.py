"""`deploy/` agrees with the code: the Kubernetes objects are of the right kinds and name the port, the
probe paths, the variables and the drain the gateway has; the HAProxy file is valid and checks and sticks
on what the gateway serves. No cluster is needed; `haproxy -c` is Debian's haproxy."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from agentify._common.errors import ConfigError
from agentify.cli.parser import build_parser
from agentify.config import Config
from agentify.config.server import DRAIN_SECONDS
from agentify.config.sources import ENV_KEYS
from agentify.mcp_server.serving import CLOSE_SECONDS
from agentify.team.drain import HEALTH_PATHS
from agentify.team.shared_state import STATE_KEYS_ENV, state_keys

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
REDIS_ENV = next(name for name, key in ENV_KEYS.items() if key == ("server", "redis"))


def _objects() -> dict[str, dict[str, Any]]:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "agentify.yaml").read_text()))
    return {doc["kind"]: doc for doc in documents}


def _container() -> dict[str, Any]:
    (container,) = _objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


def test_the_manifests_are_the_kubernetes_objects_a_team_needs() -> None:
    objects = _objects()
    assert sorted(objects) == [
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Secret",
        "Service",
    ]
    assert objects["Deployment"]["apiVersion"] == "apps/v1"
    assert all(objects[kind]["apiVersion"] == "v1" for kind in ("ConfigMap", "Secret", "Service"))
    labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert objects["Deployment"]["spec"]["selector"]["matchLabels"] == labels
    assert objects["Service"]["spec"]["selector"] == labels


def test_the_deployment_serves_on_the_port_and_paths_of_the_gateway() -> None:
    container = _container()
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.transport) == ("serve", "http")
    ((port,),) = [[p for p in container["ports"] if p["containerPort"] == args.port]]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert {"/healthz", "/readyz"} == set(HEALTH_PATHS)
    assert [p["targetPort"] for p in _objects()["Service"]["spec"]["ports"]] == [port["name"]]


def test_the_config_map_is_a_valid_config_and_the_secret_holds_what_the_replicas_read() -> None:
    objects = _objects()
    config = Config.model_validate(json.loads(objects["ConfigMap"]["data"]["agentify.json"]))
    assert config.server.auth.type == "tokens"
    secret = objects["Secret"]["stringData"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in _container()["env"]}
    assert set(env) == {STATE_KEYS_ENV, REDIS_ENV}
    assert all(ref["name"] == objects["Secret"]["metadata"]["name"] and ref["key"] in secret for ref in env.values())
    assert json.loads(secret["tokens.json"]) == {"tokens": []}
    with pytest.raises(ConfigError, match="at least 32 bytes"):  # the placeholder never runs
        state_keys({STATE_KEYS_ENV: secret[STATE_KEYS_ENV]})


def test_the_pods_hold_no_api_token_have_limits_and_only_the_balancer_reaches_them() -> None:
    objects = _objects()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert pod["automountServiceAccountToken"] is False
    resources = _container()["resources"]
    assert {"cpu", "memory"} <= set(resources["limits"]) and {"cpu", "memory"} <= set(resources["requests"])
    policy = objects["NetworkPolicy"]
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] and all(peer["podSelector"]["matchLabels"] for peer in rule["from"])  # never everyone
    assert [p["port"] for p in rule["ports"]] == [p["name"] for p in _container()["ports"]]
    budget = objects["PodDisruptionBudget"]
    assert budget["apiVersion"] == "policy/v1" and budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["maxUnavailable"] < objects["Deployment"]["spec"]["replicas"]


@pytest.mark.parametrize("key", ["0" * 64, "ab" * 32, "replace-me", "x" * 31])
def test_a_state_key_that_is_no_random_key_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match="secret randomness"):
        state_keys({STATE_KEYS_ENV: key})
    assert state_keys({STATE_KEYS_ENV: "9b2e4f71c0a8d3e65f1b7c29a4e8d0f3b6a15c7e92d4f08a3c6e1b5d7f9a2c4e"}) == [
        "9b2e4f71c0a8d3e65f1b7c29a4e8d0f3b6a15c7e92d4f08a3c6e1b5d7f9a2c4e"
    ]


def test_the_grace_period_covers_the_pre_stop_wait_and_the_drain() -> None:
    objects = _objects()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    drain = Config.model_validate(json.loads(objects["ConfigMap"]["data"]["agentify.json"])).server.drain_seconds
    assert drain <= DRAIN_SECONDS
    (pre_stop,) = [float(n) for n in _container()["lifecycle"]["preStop"]["exec"]["command"] if n.isdigit()]
    assert pod["terminationGracePeriodSeconds"] > pre_stop + drain + CLOSE_SECONDS


def test_the_haproxy_config_checks_readiness_and_sticks_on_the_session_header() -> None:
    text = (DEPLOY / "haproxy.cfg").read_text()
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    assert "option httpchk GET /readyz" in lines
    assert f"stick match req.hdr({MCP_SESSION_ID_HEADER})" in lines
    assert f"stick store-response res.hdr({MCP_SESSION_ID_HEADER})" in lines
    assert "balance roundrobin" in lines
    assert any(re.fullmatch(r"retry-on .*\b503\b.*", line) for line in lines)
    assert "option http-buffer-request" in lines  # a request is retried only if HAProxy holds it whole
    assert {"option persist", "option forwardfor"} <= set(lines)
    assert not any(line.startswith("compression") for line in lines)


def test_haproxy_accepts_the_shipped_config_with_replicas_added(tmp_path: Path) -> None:
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(haproxy, os.X_OK):
        pytest.fail("haproxy is missing: run scripts/setup.sh --tests")
    config = tmp_path / "haproxy.cfg"
    config.write_text((DEPLOY / "haproxy.cfg").read_text() + "    server replica1 127.0.0.1:8765\n")
    for path in (DEPLOY / "haproxy.cfg", config):
        checked = subprocess.run([haproxy, "-c", "-f", str(path)], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "broken.cfg"
    broken.write_text((DEPLOY / "haproxy.cfg").read_text() + "    stick nowhere\n")
    assert subprocess.run([haproxy, "-c", "-f", str(broken)], capture_output=True, timeout=60).returncode != 0
