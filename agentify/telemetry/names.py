"""Span and metric attribute names: the OpenTelemetry MCP and GenAI semantic conventions (development
status, checked in the semantic-conventions-genai repository, November 2026), and agentify's own.

`CONTENT` lists the attributes that carry what users and backends said (task input, tool arguments,
tool results): the console and `traceFile` keep them, an exporter only with `otel.captureContent`.
"""

from __future__ import annotations

SCOPE = "agentify"
"""The instrumentation scope of agentify's own spans (the SDK's are `mcp-python-sdk`)."""

# The conventions' names.
MCP_METHOD = "mcp.method.name"
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
TOOL_NAME = "gen_ai.tool.name"
OPERATION = "gen_ai.operation.name"
TRANSPORT = "network.transport"
ERROR_TYPE = "error.type"
RPC_STATUS = "rpc.response.status_code"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ENDUSER = "enduser.id"

EXECUTE_TOOL = "execute_tool"
PLAN = "plan"
TOOL_ERROR = "tool_error"
"""`error.type` of a call whose result has `isError` (the conventions' value)."""

# agentify's own.
TASK_KIND = "agentify.task.kind"
"""Marks a task's root span: orchestrate, plan, call or search."""
TASK_INPUT = "agentify.task.input"
WAITING = "agentify.task.waiting"
"""On a span that ended because the client must answer first (a 2026-07-28 round trip): what it was asked."""
BACKEND = "agentify.backend"
PLANNER = "agentify.planner"
PLANNER_REQUESTS = "agentify.planner.requests"
TOOLS_OFFERED = "agentify.planner.tools_offered"
CONFIRM_REASON = "agentify.confirm.reason"
CONFIRM_ANSWER = "agentify.confirm.answer"
RESULT_CHARS = "agentify.result.chars"
RESULT_CUT = "agentify.result.cut"
SEARCH_TOOLS = "agentify.search.tools"

CONTENT = frozenset({TASK_INPUT, TOOL_ARGUMENTS, TOOL_RESULT})
CLOSED = frozenset({MCP_METHOD, MCP_PROTOCOL_VERSION, OPERATION, TRANSPORT, ERROR_TYPE, RPC_STATUS, TASK_KIND})
"""Attributes whose values come from a closed set (methods, operation names, error codes): the sinks
have nothing to redact in them, and skip the work."""
