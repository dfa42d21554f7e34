"""stdout of the stdio server is the MCP protocol: only agentify/cli/output.py writes to it, and it refuses
once `serve` has closed it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentify
from agentify.cli import output

PACKAGE = Path(agentify.__file__).parent
OUTPUT = PACKAGE / "cli" / "output.py"


def _writes_stdout(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
        return not any(keyword.arg == "file" for keyword in node.keywords)
    text = ast.unparse(node) if isinstance(node, ast.Attribute) else ""
    return text in ("sys.stdout.write", "sys.stdout.buffer.write", "sys.__stdout__.write")


def test_only_the_terminal_output_module_writes_to_stdout() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OUTPUT
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _writes_stdout(node)
    ]
    assert found == []


def test_say_refuses_once_stdout_is_the_protocol(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    output.say("before")
    monkeypatch.setattr(output, "_closed_for", None)
    output.close_stdout("the MCP protocol")
    with pytest.raises(RuntimeError, match="stdout is the MCP protocol"):
        output.say("after")
    assert capsys.readouterr().out == "before\n"
