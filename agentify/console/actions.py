"""The console's routes that act on the gateway: run a task, call a tool, answer a confirmation, restart a
backend, approve pinned tools.

Tasks and tool calls go through `TaskRunner.run` and `TaskRunner.call`, exactly as the MCP tools
`orchestrate_task` and `call_tool` do, so the same checks and the same safety policy apply; what the
policy must confirm is asked in the page (`ConsoleConfirmer`). Each result is redacted once and then
cut, at this sink (`Views.task_result`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field

from agentify.console.confirmations import ConsoleConfirmer
from agentify.console.governance import pins_of
from agentify.console.views import Views
from agentify.errors import AgentifyError
from agentify.mcp_server.results import error_result, outcome_result

if TYPE_CHECKING:
    from agentify.console.views import ConsoleServices
    from agentify.gateway.tasks import TaskOutcome

_TASK_EXAMPLE = {"query": "read README.md", "context": {"currentWorkingDirectory": "/path/to/project"}}
_CALL_EXAMPLE = {"name": "fs__read_text_file", "arguments": {"path": "/path/to/project/README.md"}}


class ConfirmationAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Literal["accept", "decline"] = Field(description="run the call, or skip it")


class PinApproval(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str | None = Field(default=None, description="one tool of the backend; all of its changed tools if left out")


def action_routes(services: ConsoleServices, views: Views, confirmer: ConsoleConfirmer) -> APIRouter:
    router = APIRouter(tags=["console"])

    async def result_of(outcome: Awaitable[TaskOutcome]) -> dict[str, Any]:
        try:
            result = outcome_result(await outcome, services.redactor)
        except AgentifyError as exc:  # TaskRunner turns every failure, bugs included, into one
            result = error_result(exc, services.redactor)
        return views.task_result(result.model_dump(by_alias=True, mode="json", exclude_none=True))

    @router.post("/tasks", summary="Run a task exactly as orchestrate_task does; returns the MCP result")
    async def run_task(
        task: Annotated[Any, Body(description="the input of orchestrate_task", examples=[_TASK_EXAMPLE])],
    ) -> dict[str, Any]:
        return await result_of(services.runner.run(task, execute=True, progress=None, confirmer=confirmer))

    @router.post("/tools/call", summary="Call one backend tool exactly as call_tool does; returns the MCP result")
    async def call_tool(
        call: Annotated[
            Any, Body(description="the input of call_tool (names from GET /api/tools)", examples=[_CALL_EXAMPLE])
        ],
    ) -> dict[str, Any]:
        return await result_of(services.runner.call(call, confirmer=confirmer))

    @router.get("/confirmations", summary="The confirmations waiting for an answer in the page, oldest first")
    async def confirmations() -> list[dict[str, Any]]:
        return views.redact(confirmer.pending())

    @router.post(
        "/confirmations/{question_id}", summary="Answer a confirmation: accept runs the call, decline skips it"
    )
    async def answer(question_id: str, body: ConfirmationAnswer) -> dict[str, Any]:
        if not confirmer.answer(question_id, body.answer):
            raise HTTPException(404, f"no open confirmation {question_id!r}: it was answered already, or it expired")
        return {"id": question_id, "answer": body.answer}

    @router.post("/backends/{backend_id}/restart", status_code=202, summary="Restart one backend now")
    async def restart(backend_id: str) -> dict[str, Any]:
        try:
            status = services.backends.restart(backend_id)
        except KeyError:
            raise HTTPException(404, f"no backend {backend_id!r} is configured") from None
        except ValueError as exc:
            raise HTTPException(409, str(exc)) from None
        logger.info("backend {} restart asked from the debug console", backend_id)
        return views.redact(status.as_dict())

    @router.post("/pins/{backend_id}/approve", summary="Accept the current form of a backend's changed tools")
    async def approve(backend_id: str, body: PinApproval | None = None) -> dict[str, Any]:
        pins = pins_of(services)
        if pins is None:
            raise HTTPException(409, "pinning is not enabled on this gateway: there is nothing to approve")
        tool = body.tool if body else None
        try:
            approved = await pins.approve(backend_id, tool)
        except KeyError:
            what = f"tool {tool!r} of backend {backend_id!r}" if tool else f"backend {backend_id!r}"
            raise HTTPException(404, f"{what} has no changed tools to approve") from None
        logger.info("pinned tools of backend {} approved from the debug console: {}", backend_id, approved)
        return {"backend": backend_id, "tool": tool, "approved": approved}

    return router
