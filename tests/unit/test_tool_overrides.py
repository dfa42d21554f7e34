from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agentify.backends.handles import ToolHandle
from agentify.backends.manifest import ManifestStore
from agentify.backends.toolset import ToolSet
from agentify.config import BackendConfig, load_sources
from agentify.errors import ConfigError
from agentify.gateway.task_spans import call_attributes
from agentify.planner import Plan
from agentify.planner.catalog import Catalog

READ = types.Tool(
    name="read",
    description="Read a file",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "tail": {"type": "number"}},
        "required": ["path"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=True),
    _meta={"ui": {"resourceUri": "ui://read/view.html"}},
)
WRITE = types.Tool(name="write", description="Write a file", input_schema={"type": "object"})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: Any = None, answerer: Any = None, logs: Any = None
    ) -> types.CallToolResult:
        self.calls.append((tool, arguments))
        return types.CallToolResult(content=[])


def backend(overrides: dict[str, Any], **tools: Any) -> BackendConfig:
    return BackendConfig.model_validate({"id": "fs", "command": "node", "tools": {"overrides": overrides, **tools}})


def handles(spec: BackendConfig, caller: Recorder, listed: list[types.Tool]) -> tuple[ToolHandle, ...]:
    toolset = ToolSet(spec, ManifestStore(None), caller)
    toolset.replace(listed)
    return toolset.handles()


@pytest.mark.anyio
async def test_the_shown_form_hides_fixed_arguments_and_a_call_sends_them_to_the_backends_own_name() -> None:
    caller = Recorder()
    spec = backend({"read": {"name": "read_notes", "description": "The notes", "arguments": {"path": "/n.txt"}}})
    read, write = handles(spec, caller, [READ, WRITE])
    assert (read.tool.name, read.tool.description, read.origin) == ("read_notes", "The notes", "read")
    assert read.tool.input_schema["properties"] == {"tail": {"type": "number"}}
    assert read.tool.input_schema["required"] == []
    assert read.tool.annotations == READ.annotations and read.tool.meta == READ.meta
    assert READ.input_schema["required"] == ["path"]  # the backend's own form is untouched
    assert write.tool == WRITE and write.origin == "write"
    await read.call({"tail": 2})
    assert caller.calls == [("read", {"tail": 2, "path": "/n.txt"})]


def test_the_catalog_names_the_shown_form_and_refuses_a_fixed_argument() -> None:
    spec = backend({"read": {"name": "read_notes", "arguments": {"path": "/n.txt"}}})
    catalog = Catalog.from_handles(handles(spec, Recorder(), [READ]))
    tool = catalog.get("fs__read_notes")
    assert tool is not None and catalog.get("fs__read") is None
    assert tool.validation_error({}) is None
    problem = tool.validation_error({"path": "/etc/passwd"})
    assert problem is not None and problem.startswith("path: fixed by tools.overrides of backend 'fs'")


def test_the_call_span_names_the_backends_own_tool() -> None:
    (read,) = handles(backend({"read": {"name": "read_notes"}}), Recorder(), [READ])
    plan = Plan(backend="fs", tool="read_notes", arguments={}, planner="ide", handle=read)
    assert call_attributes(plan, read)["gen_ai.tool.name"] == "read"


def test_filters_name_the_backends_own_tools_and_a_manifest_keeps_the_backends_form(tmp_path: Path) -> None:
    spec = backend({"read": {"name": "read_notes"}}, deny=["write"])
    store = ManifestStore(tmp_path)
    toolset = ToolSet(spec, store, Recorder())
    toolset.replace([READ, WRITE])
    assert [t.name for t in toolset.tools] == ["read_notes"]
    assert [t.name for t in ToolSet(spec, store, Recorder()).tools] == ["read_notes"]  # planned from the manifest
    assert store.load(spec) == [READ, WRITE]


def test_a_rename_onto_a_tool_the_backend_keeps_is_not_applied() -> None:
    spec = backend({"write": {"name": "read", "description": "Write"}})
    read, write = handles(spec, Recorder(), [READ, WRITE])
    assert (read.tool.name, write.tool.name, write.tool.description) == ("read", "write", "Write")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"a": {"name": "c"}, "b": {"name": "c"}}, "overrides show both 'a' and 'b' as 'c'"),
        ({"a": {"name": "b"}, "b": {"description": "kept"}}, "overrides show both 'a' and 'b' as 'b'"),
        ({"a": {"name": "has space"}}, "'has space' is not a valid tool name"),
        ({"a": {"nmae": "b"}}, 'unknown key "backends.0.tools.overrides.a.nmae" (did you mean "name"?)'),
    ],
)
def test_overrides_that_cannot_work_are_config_errors_naming_the_field(
    tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "agentify.json"
    path.write_text(json.dumps({"backends": [{"id": "fs", "command": "x", "tools": {"overrides": overrides}}]}))
    with pytest.raises(ConfigError) as caught:
        load_sources(str(path), {}, {}).resolve()
    assert expected in str(caught.value)
