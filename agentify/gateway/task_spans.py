"""A task's spans: each step is an OpenTelemetry span, its failure recorded in one place (`step`).

Named and attributed as the MCP and GenAI semantic conventions say where they speak (the backend
call is a CLIENT span `tools/call <tool>` with `gen_ai.tool.name` the backend's own tool name);
agentify's own attributes are under `agentify.`. Values are recorded as they are: redaction and
cutting happen at each sink (the console's trace store, the exporter), never here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from agentify.backends import ToolHandle
from agentify.errors import AgentifyError, TaskCancelled
from agentify.gateway.policy import AskingClient
from agentify.planner import Plan
from agentify.telemetry.names import (
    BACKEND,
    ERROR_TYPE,
    EXECUTE_TOOL,
    INPUT_TOKENS,
    MCP_METHOD,
    OPERATION,
    OUTPUT_TOKENS,
    PLANNER_REQUESTS,
    REQUEST_MODEL,
    SERVER_ADDRESS,
    SERVER_PORT,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    TOOLS_OFFERED,
    TRANSPORT,
    WAITING,
)


@contextmanager
def step(
    tracer: Tracer,
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: dict[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """A span around one step, current while it runs (the backend call's `traceparent` comes from it).

    A failure sets `error.type` (the error code) and the span's status, and is re-raised; a question
    to the client (2026-07-28) sets `agentify.task.waiting` instead."""
    with tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except AgentifyError as exc:
            failed(span, exc.code, exc.message)
            raise
        except AskingClient as asking:
            span.set_attribute(WAITING, asking.what)
            raise
        except anyio.get_cancelled_exc_class():
            failed(span, TaskCancelled.code, "cancelled by the client")
            raise
        except Exception as exc:  # a bug: recorded, and mapped to internal_error by the task around it
            span.record_exception(exc)
            failed(span, type(exc).__qualname__, str(exc))
            raise


def failed(span: Span, error_type: str, message: str | None = None) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(StatusCode.ERROR, message)


def trace_id_of(span: Span) -> str | None:
    """The W3C trace id, or None when tracing is off (`OTEL_SDK_DISABLED`)."""
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def as_json(value: Any) -> str:
    """Content for a span attribute (attributes are flat): the sinks parse or cut it."""
    return json.dumps(value, ensure_ascii=False, default=str)


def plan_attributes(plan: Plan) -> dict[str, AttributeValue]:
    usage = plan.usage
    attributes: dict[str, AttributeValue] = {
        INPUT_TOKENS: usage.prompt_tokens,
        OUTPUT_TOKENS: usage.completion_tokens,
        PLANNER_REQUESTS: usage.requests,
        TOOLS_OFFERED: usage.tools_offered,
        BACKEND: plan.backend,
        TOOL_NAME: plan.tool,
        TOOL_ARGUMENTS: as_json(plan.arguments),
    }
    if usage.model:
        attributes[REQUEST_MODEL] = usage.model
    return attributes


def call_attributes(plan: Plan, handle: ToolHandle) -> dict[str, AttributeValue]:
    """The conventions' MCP client span: method, tool (the backend's own name, also when `tools.overrides`
    shows it renamed), operation, transport, and where a remote server is."""
    spec = handle.spec
    attributes: dict[str, AttributeValue] = {
        MCP_METHOD: "tools/call",
        TOOL_NAME: handle.origin,
        OPERATION: EXECUTE_TOOL,
        TRANSPORT: "tcp" if spec.remote else "pipe",
        BACKEND: plan.backend,
        TOOL_ARGUMENTS: as_json(plan.arguments),
    }
    if spec.url:
        parts = urlsplit(spec.url)  # the host and port only: never the URL, which may hold credentials
        if parts.hostname:
            attributes[SERVER_ADDRESS] = parts.hostname
        try:
            attributes[SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            pass
    return attributes
