"""`agentify run`'s form at the terminal (`TerminalForm`), answered in process from a scripted stdin: what it
shows of a field and how a line becomes its value."""

from __future__ import annotations

import io
import sys
from contextlib import nullcontext
from typing import Any

import mcp_types as types
import pytest

from agentify.cli.terminal import TerminalForm

pytestmark = pytest.mark.anyio


async def answer(monkeypatch: pytest.MonkeyPatch, properties: dict[str, Any], lines: str) -> types.ElicitResult:
    """The form asking for `properties`, answered with `lines` typed at the terminal."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    params = types.ElicitRequestFormParams(message="agentify asks", requested_schema=schema)
    request = types.ElicitRequest(params=params)
    answers = await TerminalForm(nullcontext, lambda text: text).answer("fake", {"arguments": request}, own=True)
    assert isinstance(answers, dict)
    result = answers["arguments"]
    assert isinstance(result, types.ElicitResult)
    return result


async def test_a_fields_default_is_shown_and_a_blank_line_takes_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    units = {"type": "string", "title": "units", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
    days = {"type": "integer", "title": "days", "default": 3}
    city = {"type": "string", "title": "city"}
    result = await answer(monkeypatch, {"units": units, "days": days, "city": city}, "\n5\n\n")
    assert result.content == {"units": "celsius", "days": 5, "city": ""}  # a blank line without a default stays blank
    shown = capsys.readouterr().err
    assert "units [celsius/fahrenheit] [default: celsius]: " in shown and "days [default: 3]: " in shown
    assert "city: " in shown and "city [default" not in shown


@pytest.mark.parametrize("typed", ["nan", "inf", "-Infinity", "1e999"])
async def test_a_number_that_is_not_finite_is_not_taken_as_one(monkeypatch: pytest.MonkeyPatch, typed: str) -> None:
    result = await answer(monkeypatch, {"ratio": {"type": "number", "title": "ratio"}}, f"{typed}\n")
    assert result.content == {"ratio": typed}  # left as text: the tool's schema refuses it, naming the field
