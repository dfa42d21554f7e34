"""What changes while the gateway serves has one owner each: the config (and what it implies) and the
client's roots. Driven in process with the real owners; the backend manager and the log sink are
recorded at their seams."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from agentify.config import BackendConfig, ConfigSources
from agentify.gateway.settings import LiveConfig, PlannerSlot
from agentify.mcp_server.roots import ClientRoots
from agentify.planner.select import PlannerSelector
from agentify.security.redact import Redactor

BACKENDS = [{"id": "fs", "command": "node"}]


class Recorded:
    def __init__(self) -> None:
        self.levels: list[str] = []
        self.backends: list[list[str]] = []

    def set_level(self, level: str) -> None:
        self.levels.append(level)

    def reconcile(self, specs: list[BackendConfig]) -> None:
        self.backends.append([spec.id for spec in specs])


def live_config() -> tuple[LiveConfig, PlannerSlot, Redactor, Recorded]:
    sources = ConfigSources(file={"backends": BACKENDS})
    config = sources.resolve()
    planners = PlannerSlot(PlannerSelector(config.planner))
    redactor, recorded = Redactor(), Recorded()
    live = LiveConfig(sources, config, redactor=redactor, logs=recorded, planners=planners, backends=recorded)
    return live, planners, redactor, recorded


def test_the_first_clients_options_change_the_config_and_what_it_implies_once() -> None:
    live, planners, redactor, recorded = live_config()
    heard: list[Any] = []
    live.listeners.append(heard.append)
    first = planners.current
    backends = [*BACKENDS, {"id": "git", "command": "git-mcp"}]
    live.apply_init_options({"OPENAI_API_KEY": "sk-from-the-client-123456", "logLevel": "DEBUG", "backends": backends})
    assert live.current.planner.api_key == "sk-from-the-client-123456"
    assert planners.current is not first and planners.current.describe().name == "openai"
    assert redactor.text("key sk-from-the-client-123456") == "key [REDACTED]"
    assert recorded.levels == ["DEBUG"] and recorded.backends == [["fs", "git"]]
    assert heard == [live.current]

    live.apply_init_options({"logLevel": "ERROR", "backends": []})  # a later client's: ignored
    assert recorded.levels == ["DEBUG"] and recorded.backends == [["fs", "git"]]
    assert [b.id for b in live.current.backends] == ["fs", "git"]


def test_a_bad_option_is_logged_and_changes_nothing() -> None:
    live, planners, _, recorded = live_config()
    before = live.current
    live.apply_init_options({"backends": [{"id": "no spaces allowed", "command": "x"}]})
    assert live.current is before and recorded.backends == [] and recorded.levels == []


def test_roots_learnt_reach_the_backends_and_forgotten_ones_stay_unknown_until_asked() -> None:
    forwarded: list[list[str]] = []
    roots = ClientRoots(lambda learnt: forwarded.append([str(r.uri) for r in learnt]))
    assert roots.known is None and roots.working_directory() is None
    workspace = [types.Root(uri="file:///work/app", name="app"), types.Root(uri="file:///work/lib", name="lib")]
    roots.learn(workspace)
    roots.learn(list(workspace))  # the same again: nothing to tell
    assert roots.working_directory() == "/work/app"
    roots.forget()  # the client said they changed
    assert roots.known is None and roots.working_directory() is None
    assert forwarded == [["file:///work/app", "file:///work/lib"]]
