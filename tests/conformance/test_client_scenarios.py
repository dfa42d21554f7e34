"""The conformance suite's client scenarios: agentify as the client of a remote backend.

For each scenario the suite starts its own test server (and authorization server) on localhost and
runs agentify_client.py with its URL: `agentify serve` driven by the official client as an IDE, calling
the server's tools through the gateway; where the scenario is about OAuth, from an IDE of each era, the
authorization and any scope step-up done by the URL the gateway asks the IDE to open (no `agentify auth`).
One scenario per test, so pytest-xdist spreads them; a scenario agentify does not pass yet is an
expected failure with its reason (strict: one that starts passing fails here until it is removed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.conformance.test_server_scenarios import conformance, summary

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
CLIENT = HERE / "agentify_client.py"
SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
]
EXPECTED = yaml.safe_load((HERE / "expected-client-failures.yml").read_text())["client"]


def _case(scenario: str) -> object:
    reason = EXPECTED.get(scenario)
    return pytest.param(scenario, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason else scenario


def test_every_expected_failure_names_a_scenario_run_here() -> None:
    assert set(EXPECTED) <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", [_case(s) for s in SCENARIOS])
def test_client_scenario(scenario: str, tmp_path: Path) -> None:
    done = conformance(
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--timeout",
        "180000",
        "--output-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, summary(done) + "\n" + _client_stderr(tmp_path)
    assert "OVERALL: PASSED" in done.stdout + done.stderr, summary(done)


def _client_stderr(results: Path) -> str:
    logs = sorted(results.rglob("stderr.txt"))
    text = logs[-1].read_text(errors="replace") if logs else ""
    return "--- agentify_client.py stderr (tail) ---\n" + "\n".join(text.splitlines()[-40:])
