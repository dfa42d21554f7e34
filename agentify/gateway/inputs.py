"""The inputs of the gateway's own tools as pydantic models: one definition for validation and schema.

`schemas.tool_schema` turns each model into the `inputSchema` the IDE sees; the handlers
validate with the same model, so what the schema allows is exactly what a handler accepts
(`additionalProperties: false` where the model forbids extra keys).

`given_call` turns a `call_tool` request into a plan: the tool looked up by its catalog name,
the arguments validated against its input schema. Raises `InvalidInput` for anything else.
"""

from __future__ import annotations

import difflib
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentify.errors import InvalidInput
from agentify.planner import Plan, PlanUsage
from agentify.planner.catalog import Catalog

MAX_SEARCH_LIMIT = 50
MAX_SEARCH_CHARS = 2000  # a search is a phrase; the bound keeps ranking and its regexes cheap
MAX_NAME_CHARS = 200  # catalog names are at most 64 characters; the bound keeps the "did you mean" cheap
Model = TypeVar("Model", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchInput(_Strict):
    """The input of `search_tools`."""

    query: str = Field(
        min_length=1,
        max_length=MAX_SEARCH_CHARS,
        description="What the tool should do, in plain words: 'read a file', 'click a button'.",
    )
    limit: int = Field(default=5, ge=1, le=MAX_SEARCH_LIMIT, description="How many tools to return, best first.")


class CallInput(_Strict):
    """The input of `call_tool`."""

    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The tool's name as search_tools gave it: '<backend>__<tool>'.",
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments, matching the input schema search_tools gave."
    )


class NoInput(_Strict):
    """The input of `list_backends`: nothing."""


def validate_input(model: type[Model], raw: Any, example: str) -> Model:
    """`raw` as `model`, or `InvalidInput` naming every problem and showing what to send."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise InvalidInput(f"invalid input: {problems}. Send {example}.") from None


def given_call(raw: Any, catalog: Catalog) -> Plan:
    """The plan of a `call_tool` request. Raises InvalidInput (unknown tool, arguments that fail its schema)."""
    call = validate_input(CallInput, raw, '{"name": "<backend>__<tool>", "arguments": {...}}')
    tool = catalog.get(call.name)
    if tool is None and (renamed := catalog.renamed(call.name)) is not None:
        raise InvalidInput(
            f"{call.name} is offered as {renamed.name} (renamed by tools.overrides in the gateway's config); "
            "call it by that name."
        )
    if tool is None:
        close = difflib.get_close_matches(call.name, list(catalog.tools), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise InvalidInput(
            f"there is no tool named {call.name!r}.{hint} Use search_tools to find a tool and its exact name "
            "(`<backend>__<tool>`)."
        )
    problem = tool.validation_error(call.arguments)
    if problem is not None:
        raise InvalidInput(
            f"the arguments do not fit the input schema of {call.name}: {problem}. search_tools shows its input schema."
        )
    return Plan(
        backend=tool.backend,
        tool=tool.tool.name,
        arguments=call.arguments,
        planner="ide",
        reasoning="chosen by the client's own model through call_tool",
        usage=PlanUsage(provider="ide", tools_offered=1),
        handle=tool.handle,
    )
