"""A bug inside agentify is reported as internal_error with its trace id, never blamed on a backend."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentify.backends import BackendManager
from agentify.config import PlannerConfig
from agentify.errors import InternalError
from agentify.gateway.events import EventBus
from agentify.gateway.settings import PlannerSlot
from agentify.gateway.tasks import TaskRunner
from agentify.gateway.traces import TraceStore
from agentify.planner.select import PlannerSelector
from agentify.security.redact import Redactor
from agentify.telemetry.setup import open_telemetry

pytestmark = pytest.mark.anyio


class BuggyPlanner:
    name = "buggy"

    async def plan(self, task: Any, catalog: Any) -> Any:
        return {}["missing"]  # a programming error, as a real bug would raise


class Selector(PlannerSelector):
    def choose(self, sampler: Any = None) -> Any:
        return BuggyPlanner()


async def test_a_bug_in_agentify_is_an_internal_error_naming_its_trace() -> None:
    traces = TraceStore(EventBus(), Redactor())
    telemetry = open_telemetry(Redactor())
    manager = BackendManager([])
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        planners = PlannerSlot(Selector(PlannerConfig(provider="offline")))
        runner = TaskRunner(manager, planners, telemetry.tracer, Redactor(), 1000, 10_000)
        with telemetry.attached(traces), pytest.raises(InternalError) as info:
            await runner.run({"query": "read README.md"}, execute=False)
        manager.close()
    error = info.value
    assert error.code == "internal_error" and error.trace_id is not None
    assert error.trace_id in error.message and "bug in agentify" in error.message
    trace = traces.get(error.trace_id)
    assert trace is not None and trace.error is not None and trace.error["code"] == "internal_error"
