"""The offline planner is sure of the tool but the task does not say a value it needs: the user is asked for
exactly those arguments in a form, in both protocol eras, and the tool runs with the answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import error_code, fake_backend, gateway_env, text_of, write_config
from tests.integration.ide_client import LOGGED_MODES, MODES, ide_client
from tests.integration.team import add_token, http_client, http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FORECAST = {"query": "what's the weather forecast?"}
PARIS = {"city": "Paris", "units": "celsius"}


def forecast_config(tmp_path: Path, **tools: Any) -> Path:
    backend = fake_backend("fake", "--forecast", **({"tools": tools} if tools else {}))
    return write_config(tmp_path, [backend], planner={"provider": "offline"})


def forecast_client(tmp_path: Path, mode: str, answer: Any = None, **tools: Any) -> Any:
    """An IDE client of a gateway on the forecast backend (its `tools` settings), answering forms with `answer`
    (a `filling`), or without elicitation when there is none."""
    options = {} if answer is None else {"elicitation_callback": answer}
    return ide_client(forecast_config(tmp_path, **tools), gateway_env(None), tmp_path / "e.log", mode, **options)


def filling(values: dict[str, Any], seen: list[types.ElicitRequestParams], action: str = "accept") -> Any:
    """Answers a form that asks for arguments with `values` (the keys it asks for), any other form (a
    confirmation) with an empty accept; `action` answers the arguments' form instead."""

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        asked = getattr(params, "requested_schema", {}).get("properties") or {}
        if not asked:
            return types.ElicitResult(action="accept", content={})
        if action != "accept":
            return types.ElicitResult(action=action)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content={k: v for k, v in values.items() if k in asked})

    return elicit


@pytest.mark.parametrize("mode", MODES + LOGGED_MODES)
async def test_a_task_that_does_not_say_what_its_tool_needs_asks_for_exactly_that_and_runs_it(
    tmp_path: Path, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    async with forecast_client(tmp_path, mode, filling(PARIS, seen)) as client:
        result = await client.call_tool("orchestrate_task", FORECAST)
        again = await client.call_tool("orchestrate_task", {"query": "weather forecast for 'Lyon' in fahrenheit"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "forecast for Paris in celsius for 1 days: sunny"
    assert (result.meta or {})["agentify/plan"]["arguments"] == PARIS
    ((form),) = seen  # the task that says both values asks nothing
    assert isinstance(form, types.ElicitRequestFormParams)
    assert form.message.startswith("agentify chose fake.forecast for this task; it needs: city, units")
    assert "as backend 'fake' describes them" in form.message  # their words are the backend's, not agentify's
    schema = form.requested_schema
    assert set(schema["properties"]) == {"city", "units"} and sorted(schema["required"]) == ["city", "units"]
    assert schema["properties"]["units"]["enum"] == ["celsius", "fahrenheit"]
    assert schema["properties"]["city"]["description"] == "The city to forecast, such as Paris"
    assert text_of(again) == "forecast for Lyon in fahrenheit for 1 days: sunny"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "word"), [("decline", "declined"), ("cancel", "dismissed")])
async def test_declining_the_question_runs_nothing_and_names_the_tool_and_its_arguments(
    tmp_path: Path, mode: str, action: str, word: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    async with forecast_client(tmp_path, mode, filling(PARIS, seen, action)) as client:
        result = await client.call_tool("orchestrate_task", FORECAST)
    assert error_code(result) == "denied", text_of(result)
    text = text_of(result)
    assert f"you {word} the question for city, units of fake.forecast" in text
    assert "`city` and `units` in the task" in text and "fake__forecast" in text
    error = (result.meta or {})["agentify/error"]
    assert error["chosen"] == {"name": "fake__forecast", "backend": "fake", "tool": "forecast"}
    assert error["missing"] == ["city", "units"]
    assert len(seen) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation_gets_no_plan_naming_the_tool_and_what_to_say(
    tmp_path: Path, mode: str
) -> None:
    async with forecast_client(tmp_path, mode) as client:
        result = await client.call_tool("orchestrate_task", FORECAST)
        planned = await client.call_tool("plan_task", FORECAST)
    unasked = "agentify could not ask you for city, units of fake.forecast (the user's client cannot answer"
    assert unasked in text_of(result)
    for answer in (result, planned):
        assert error_code(answer) == "no_plan", text_of(answer)
        assert "Say the value of `city` and `units` in the task" in text_of(answer)
        error = (answer.meta or {})["agentify/error"]
        assert error["chosen"]["name"] == "fake__forecast" and error["missing"] == ["city", "units"]
        assert error["candidates"][0]["name"] == "fake__forecast"


@pytest.mark.parametrize("mode", MODES)
async def test_a_form_nobody_answers_in_time_runs_nothing_and_says_what_to_do(tmp_path: Path, mode: str) -> None:
    """2025-11-25: the call waits for the answer, and after 1 s it is the `no_plan` saying to give more time.
    2026-07-28: the gateway waits for nobody; the form's sealed round lives 1 s, so an answer after that is
    refused by the SDK's state check, an error the client gets at once that says what to do."""
    config = write_config(
        tmp_path, [fake_backend("fake", "--forecast")], planner={"provider": "offline"}, confirmTimeoutSeconds=1
    )
    never = anyio.Event()
    answers: list[str] = []

    async def late(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        with anyio.fail_after(30):
            if mode == "legacy":  # nobody answers: the gateway gives up after 1 s and cancels its question
                await never.wait()
            else:  # the person answers after the round expired: the client sends it with the sealed state
                await anyio.sleep(1.5)
        answers.append(mode)
        return types.ElicitResult(action="accept", content=PARIS)

    with anyio.fail_after(90):
        async with ide_client(config, gateway_env(None), tmp_path / "e.log", mode, elicitation_callback=late) as c:
            if mode == "legacy":
                result = await c.call_tool("orchestrate_task", FORECAST)
                assert error_code(result) == "no_plan", text_of(result)
                assert text_of(result).startswith(
                    "agentify no_plan: agentify could not ask you for city, units of fake.forecast (nobody answered "
                    "agentify's own question about backend 'fake' within 1 s; give more time with "
                    "confirmTimeoutSeconds), so nothing was run"
                )
                assert "Say the value of `city` and `units` in the task" in text_of(result)
                assert answers == []
            else:
                with pytest.raises(MCPError) as refused:
                    await c.call_tool("orchestrate_task", FORECAST)
                assert refused.value.error.code == types.INVALID_PARAMS
                assert refused.value.error.message == (
                    "Invalid or expired requestState: the answers came after the 1 s a question stays open "
                    "(confirmTimeoutSeconds), or belong to another call or to a gateway with other keys (replicas "
                    "share AGENTIFY_STATE_KEYS). Call the tool again without requestState to be asked anew."
                )
                assert answers == [mode]  # it was answered, after its round expired
            after = await c.call_tool("orchestrate_task", {"query": "weather forecast for 'Lyon' in celsius"})
    assert text_of(after) == "forecast for Lyon in celsius for 1 days: sunny"  # the gateway goes on serving


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("query", "secret"),
    [("get the latest stock quote", "api_key"), ("show the balance of my bank account", "code")],  # code: by its title
)
async def test_a_credential_is_never_asked_for_in_a_form(tmp_path: Path, mode: str, query: str, secret: str) -> None:
    seen: list[types.ElicitRequestParams] = []
    values = {"symbol": "ACME", "api_key": "sk-typed-into-a-form", "account": "FR76-1", "code": "492817"}
    async with forecast_client(tmp_path, mode, filling(values, seen)) as client:
        result = await client.call_tool("orchestrate_task", {"query": query})
    assert error_code(result) == "no_plan", text_of(result)
    assert f"`{secret}` is a credential" in text_of(result) and "tools.overrides" in text_of(result)
    assert "missing" not in (result.meta or {})["agentify/error"]
    assert seen == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_that_needs_confirmation_asks_for_it_after_the_arguments_showing_them(
    tmp_path: Path, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    async with forecast_client(tmp_path, mode, filling(PARIS, seen), confirm=["forecast"]) as client:
        result = await client.call_tool("orchestrate_task", FORECAST)
    assert text_of(result) == "forecast for Paris in celsius for 1 days: sunny"
    arguments, confirmation = seen
    assert arguments.message.startswith("agentify chose fake.forecast")
    assert confirmation.message.startswith("agentify wants to run forecast on backend fake.")
    assert "- city: Paris" in confirmation.message and "- units: celsius" in confirmation.message


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ({"city": "Paris", "units": "kelvin"}, "does not fit the tool: units: 'kelvin' is not one of"),
        ({"city": 42, "units": "celsius"}, "does not fit the tool: city: 42 is not of type 'string'"),
        ({"city": " ", "units": "celsius"}, "you left `city` of fake.forecast empty"),
    ],
)
async def test_a_value_the_tool_does_not_take_or_a_blank_one_is_refused_saying_what_is_wrong_and_nothing_runs(
    tmp_path: Path, mode: str, typed: dict[str, Any], said: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    async with forecast_client(tmp_path, mode, filling(typed, seen)) as client:
        result = await client.call_tool("orchestrate_task", FORECAST)
        after = await client.call_tool("orchestrate_task", {"query": "weather forecast for 'Lyon' in celsius"})
    assert error_code(result) == "invalid_input", text_of(result)
    text = text_of(result)
    assert text.startswith("agentify invalid_input: ") and said in text and "Nothing was run" in text
    assert text_of(after) == "forecast for Lyon in celsius for 1 days: sunny"  # the gateway goes on serving


@pytest.mark.parametrize("mode", MODES)
async def test_people_asked_at_once_on_a_team_gateway_each_answer_their_own_form(tmp_path: Path, mode: str) -> None:
    """Three forms are open at the same moment (each person's answer waits for the others' forms): each goes to
    the session whose call it is, each call runs with its own person's answer (carol declines hers), and the
    audit has one line a person, with the answers only as the hash of the arguments."""
    server = {"auth": {"type": "tokens", "file": "tokens.json"}, "audit": {"file": "audit.jsonl"}}
    backend = fake_backend("fake", "--forecast")
    config = write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)
    cities = {"alice": "Paris-5d1e", "bob": "Lyon-91c2", "carol": None}
    tokens = {who: await add_token(tmp_path / "tokens.json", who) for who in cities}
    asked = {who: anyio.Event() for who in cities}
    seen: dict[str, list[types.ElicitRequestParams]] = {who: [] for who in cities}
    results: dict[str, types.CallToolResult] = {}

    def person(who: str) -> Any:
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            seen[who].append(params)
            asked[who].set()
            for event in asked.values():
                await event.wait()
            if (city := cities[who]) is None:
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content={"city": city, "units": "celsius"})

        return elicit

    async def run(who: str, url: str) -> None:
        async with http_client(url, tokens[who], mode, elicitation_callback=person(who)) as client:
            results[who] = await client.call_tool("orchestrate_task", FORECAST)

    with anyio.fail_after(150):
        async with http_gateway(config, tmp_path / "e.log") as gateway, anyio.create_task_group() as tg:
            for who in cities:
                tg.start_soon(run, who, gateway.url)
    for who, city in cities.items():
        said = text_of(results[who])
        wanted = f"forecast for {city} in celsius for 1 days: sunny" if city else "agentify denied: you declined"
        assert said.startswith(wanted), said
        (form,) = seen[who]
        assert form.message.startswith("agentify chose fake.forecast")
    audit = (tmp_path / "audit.jsonl").read_text()
    lines = sorted(
        (r["principal"], r["operation"], r["target"], r["decision"]) for r in map(json.loads, audit.split("\n")[:-1])
    )
    assert lines == [
        ("alice", "orchestrate_task", "fake__forecast", "allowed"),
        ("bob", "orchestrate_task", "fake__forecast", "allowed"),
        ("carol", "orchestrate_task", "fake__forecast", "declined"),
    ]
    assert "Paris" not in audit and "Lyon" not in audit
