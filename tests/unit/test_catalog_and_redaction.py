from __future__ import annotations

import re

import mcp_types as types

from agentify.planner.catalog import Catalog
from agentify.security.redact import MASK, Redactor

SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool(name: str, schema: dict[str, object] | None = None) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"})


def test_names_are_backend_and_tool_and_always_safe_and_unique() -> None:
    catalog = Catalog.build(
        [
            ("fs", "", [tool("read_text_file"), tool("a.b"), tool("a_b"), tool("x" * 100), tool("x" * 101)]),
            ("web-1", "", [tool("browser navigate")]),
        ]
    )
    names = list(catalog.tools)
    assert "fs__read_text_file" in names and "fs__a_b" in names
    assert all(SAFE.match(n) for n in names)
    assert len(set(names)) == len(names) == 6
    assert catalog.find("fs", "a.b") is not None and catalog.find("fs", "a.b").name != "fs__a_b"  # type: ignore[union-attr]


def test_names_are_stable_across_builds() -> None:
    build = lambda: list(Catalog.build([("fs", "", [tool("a.b"), tool("y" * 90)])]).tools)  # noqa: E731
    assert build() == build()


def test_arguments_are_validated_against_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "minimum": 0}},
        "required": ["path"],
        "additionalProperties": False,
    }
    entry = Catalog.build([("fs", "", [tool("read", schema)])]).get("fs__read")
    assert entry is not None
    assert entry.validation_error({"path": "a"}) is None
    assert "'path' is a required property" in (entry.validation_error({}) or "")
    assert (entry.validation_error({"path": "a", "depth": -1}) or "").startswith("depth:")
    assert "not of type" in (entry.validation_error({"path": 1}) or "")
    assert "JSON object" in (entry.validation_error(["a"]) or "")


def test_redactor_masks_known_secrets_and_secret_shapes() -> None:
    redactor = Redactor(["env-value-1234", "ab"])
    text = redactor.text("key sk-abcdefgh12345678 and Bearer abc.def.ghi.jkl and env-value-1234 and ab")
    assert "sk-abcdefgh12345678" not in text and "abc.def.ghi.jkl" not in text and "env-value-1234" not in text
    assert text.endswith("and ab")  # too short to be treated as a secret
    assert redactor.data({"a": ["token=supersecret99"]}) == {"a": [f"token={MASK}"]}
    assert redactor.text("sk-abcdefgh12345678", patterns=False) == "sk-abcdefgh12345678"


def test_error_results_are_redacted_since_they_quote_backend_stderr() -> None:
    from agentify.errors import BackendUnavailable
    from agentify.mcp_server.results import error_result

    error = BackendUnavailable("backend 'db' exited. Last stderr: connecting to postgres://app:hunter22@db/x")
    text = error_result(error, Redactor(["hunter22-not-used"])).content[0].text  # type: ignore[union-attr]
    assert "hunter22" not in text and "postgres://app:[REDACTED]@db/x" in text
