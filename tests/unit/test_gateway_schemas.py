"""The gateway's input schemas come from the models its handlers validate with, shaped for every client."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from agentify._common.schemas import tool_schema
from agentify.config import Config
from agentify.gateway.inputs import CallInput, SearchInput
from agentify.mcp_server.server import exposed_tools
from agentify.planner import TaskInput


class Inner(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = None


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inner: Inner | None = None
    count: int = 3


def test_nullable_and_nested_models_become_plain_optional_properties() -> None:
    schema = tool_schema(Outer)
    assert schema == {
        "additionalProperties": False,
        "properties": {
            "inner": {"properties": {"name": {"type": "string"}}, "type": "object"},
            "count": {"default": 3, "type": "integer"},
        },
        "type": "object",
    }


def test_the_schema_refuses_exactly_what_the_model_refuses() -> None:
    assert tool_schema(SearchInput)["additionalProperties"] is False
    with pytest.raises(ValidationError):
        SearchInput.model_validate({"query": "read", "extra": 1})
    task = tool_schema(TaskInput)
    assert "additionalProperties" not in task["properties"]["context"]
    assert TaskInput.model_validate({"query": "x", "context": {"editor": "vim"}}).context is not None
    assert tool_schema(CallInput)["required"] == ["name"]


@pytest.mark.parametrize(
    ("expose", "names"),
    [
        (["orchestrate", "search"], ["orchestrate_task", "plan_task", "list_backends", "search_tools", "call_tool"]),
        (["orchestrate"], ["orchestrate_task", "plan_task", "list_backends"]),
        (["search"], ["search_tools", "call_tool"]),
    ],
)
def test_expose_chooses_the_tools(expose: list[Any], names: list[str]) -> None:
    assert [t.name for t in exposed_tools(Config(expose=expose))] == names


def test_expose_must_name_known_groups() -> None:
    with pytest.raises(ValidationError):
        Config.model_validate({"expose": ["everything"]})
    with pytest.raises(ValidationError):
        Config.model_validate({"expose": []})


def test_search_queries_and_tool_names_are_bounded_in_the_schema_and_the_handler() -> None:
    from agentify.errors import InvalidInput
    from agentify.gateway.inputs import MAX_NAME_CHARS, MAX_SEARCH_CHARS, validate_input

    assert tool_schema(SearchInput)["properties"]["query"]["maxLength"] == MAX_SEARCH_CHARS
    assert tool_schema(CallInput)["properties"]["name"]["maxLength"] == MAX_NAME_CHARS
    with pytest.raises(InvalidInput, match="query"):
        validate_input(SearchInput, {"query": "x" * 1_000_000}, "{}")
    with pytest.raises(InvalidInput, match="name"):
        validate_input(CallInput, {"name": "y" * 1_000_000, "arguments": {}}, "{}")
