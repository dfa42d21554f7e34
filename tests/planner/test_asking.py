"""The offline planner sure of a tool whose required arguments the task does not say: the plan it filled, and
the arguments a form may ask a person for (`NeedsArguments`); and the form built from the tool's own schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentify.errors import InvalidInput
from agentify.planner import Plan
from agentify.planner.form import NotAskable, answered, form_schema
from agentify.planner.offline.asking import Ask, asking, needs
from agentify.planner.offline.extract import analyse
from agentify.planner.offline.fill import fill
from agentify.security.credentials import secret_argument
from tests.planner.support import asks, catalog_of, plan, refusal, task, tool

pytestmark = pytest.mark.anyio

CITY = {"type": "string", "description": "The city to forecast"}
UNITS = {"type": "string", "enum": ["celsius", "fahrenheit"]}
FORECAST = catalog_of(
    tool("forecast", "Get the weather forecast of a city", {"city": CITY, "units": UNITS}, "city", "units"),
    backend="weather",
)


async def test_a_tool_it_is_sure_of_asks_for_exactly_the_required_arguments_the_task_does_not_say() -> None:
    asked = await asks("what's the weather forecast?", FORECAST)
    assert (asked.plan.backend, asked.plan.tool, asked.plan.arguments) == ("weather", "forecast", {})
    assert (asked.missing.name, asked.missing.arguments) == ("weather__forecast", ("city", "units"))
    assert "Say the value of `city` and `units` in the task" in asked.message
    assert asked.candidates[0]["name"] == "weather__forecast"
    kept = await asks("forecast for 'Paris'", FORECAST)  # what the task says stays, the rest is asked
    assert (kept.plan.arguments, kept.missing.arguments) == ({"city": "Paris"}, ("units",))
    assert kept.answered({"units": "celsius", "city": "Lyon", "other": 1}) == {"city": "Paris", "units": "celsius"}
    assert (await plan("forecast for 'Paris' in celsius", FORECAST)).arguments == {"city": "Paris", "units": "celsius"}


async def test_a_path_or_url_the_user_gives_is_read_as_the_task_would_say_it(tmp_path: Path) -> None:
    files = catalog_of(
        tool("read_file", "Read a file", {"path": {"type": "string"}}, "path"),
        tool("open_page", "Open a web page", {"url": {"type": "string"}}, "url"),
    )
    asked = await asks("read a file", files, cwd=tmp_path)
    assert asked.answered({"path": "notes.txt"}) == {"path": str(tmp_path / "notes.txt")}
    assert asked.answered({"path": "/etc/hosts"}) == {"path": "/etc/hosts"}
    assert (await asks("open a web page", files)).answered({"url": "localhost:3000"}) == {
        "url": "http://localhost:3000"
    }


@pytest.mark.parametrize(
    ("argument", "spec"),
    [
        ("api_key", {"type": "string"}),  # a credential, by its name
        ("apiKey", {"type": "string"}),
        ("access_token", {"type": "string"}),
        ("appid", {"type": "string", "description": "Your unique API key"}),  # or by its description
        ("filters", {"type": "object", "properties": {"a": {"type": "string"}}}),  # no form field carries these
        ("tags", {"type": "array", "items": {"type": "string"}}),
        ("level", {"enum": [1, 2, 3]}),
    ],
)
async def test_an_argument_a_form_must_not_or_cannot_ask_for_is_a_refusal_naming_it(
    argument: str, spec: dict[str, Any]
) -> None:
    properties = {"city": CITY, argument: spec}
    catalog = catalog_of(tool("forecast", "Get the weather forecast of a city", properties, "city", argument))
    message = await refusal("what's the weather forecast?", catalog)
    assert f"`{argument}` is a credential" in message or f"`{argument}` takes" in message, message


async def test_an_element_ref_of_a_page_is_never_asked_of_a_person() -> None:
    assert "snapshot of the page" in await refusal("click the Sign in button")


async def test_a_value_the_task_says_that_no_argument_takes_is_still_a_refusal() -> None:
    message = await refusal("what's the weather forecast at localhost:3000?", FORECAST)
    assert "`city`" in message  # the plan would leave out what the user said: it is not completed by asking


async def test_a_filled_value_the_tool_refuses_is_a_refusal_not_a_question() -> None:
    code = {"type": "string", "pattern": "^[A-Z]+$"}
    catalog = catalog_of(tool("open_ticket", "Open a ticket of a project", {"project": code, "title": CITY}, "project"))
    assert (await plan('open a ticket of project "SHOP"', catalog)).arguments == {"project": "SHOP"}
    two = catalog_of(
        tool("open_ticket", "Open a ticket", {"project": code, "days": {"type": "integer"}}, "project", "days")
    )
    assert "does not match" in await refusal('open a ticket of project "shop"', two)
    assert (await asks('open a ticket of project "SHOP"', two)).missing.arguments == ("days",)


def test_the_form_carries_each_argument_as_the_tool_describes_it() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": ["string", "null"], "description": "The city", "pattern": "^[A-Z]", "minLength": 2},
            "units": {**UNITS, "default": "celsius"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": "three"},
            "when": {"type": "string", "format": "date"},
            "site": {"type": "string", "format": "hostname"},
            "size": {"anyOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "colors": {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}, "maxItems": 2},
            "rush": {"type": "boolean"},
            "note": {"description": "Anything"},
            "level": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
    }
    names = list(schema["properties"])  # type: ignore[call-overload]
    form = form_schema(schema, names)
    fields = form["properties"]
    assert form["type"] == "object" and form["required"] == names
    assert fields["city"] == {"type": "string", "title": "city", "description": "The city", "minLength": 2}
    assert fields["units"] == {
        "type": "string",
        "title": "units",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
    }
    assert fields["days"] == {"type": "integer", "title": "days", "minimum": 1, "maximum": 7}  # a default it refuses
    assert fields["when"]["format"] == "date" and "format" not in fields["site"]
    assert fields["size"]["oneOf"] == [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]
    assert fields["colors"] == {
        "type": "array",
        "title": "colors",
        "items": {"type": "string", "enum": ["red", "blue"]},
        "maxItems": 2,
    }
    assert fields["rush"]["type"] == "boolean" and fields["note"]["type"] == "string"
    assert fields["level"]["type"] == "number"
    assert form_schema(schema, ["days"])["properties"].keys() == {"days"}  # only what is asked


def test_a_credential_or_a_value_a_form_cannot_carry_is_not_askable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "password": {"type": "string"},
            "q": {"type": "string", "description": "Your API access key, from the dashboard"},
            "filters": {"type": "object"},
            "paths": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "code": {"type": "string", "title": "Access token"},  # a credential by its title alone
            "login": {"oneOf": [{"const": "a", "title": "Password hunter2"}, {"const": "b", "title": "None"}]},
            "grant": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Your API key"}]}},
        },
    }
    for name in schema["properties"]:  # type: ignore[attr-defined]
        with pytest.raises(NotAskable, match=f"`{name}`"):
            form_schema(schema, [name])


def test_an_answer_keeps_only_what_was_asked_with_whole_numbers_as_integers_and_no_blank_text() -> None:
    form = form_schema({"properties": {"days": {"type": "integer"}, "city": CITY}}, ["days", "city"])
    content = {"days": 3.0, "city": "Paris", "admin": True, "note": None}
    assert answered(form, content) == {"days": 3, "city": "Paris"}
    assert answered(form, {"days": 2, "city": "  "}) == {"days": 2}  # a blank text is no answer
    assert answered(form, None) == {}


@pytest.mark.parametrize(
    ("name", "description", "secret"),
    [
        ("api_key", "", True),
        ("X-Auth-Token", "", True),
        ("clientSecret", "", True),
        ("password", "", True),
        ("q", "Your API key for the service", True),
        ("code", "The bearer token to send", True),
        ("passcode", "", True),
        ("pin", "", True),
        ("userPin", "", True),
        ("pin_code", "", True),
        ("mfa_code", "", True),
        ("2faCode", "", True),
        ("twoFactorCode", "", True),
        ("code", "The verification code we texted you", True),
        ("otc", "Your one-time code", True),
        ("jwt", "", True),
        ("auth", "The JWT to present", True),
        ("bearer", "", True),
        ("seed_phrase", "", True),
        ("words", "The mnemonic phrase of your wallet", True),
        ("x", "The 12-word seed phrase", True),
        ("sk", "Your OpenAI key (sk-...)", True),
        ("license", "Your license key", True),
        ("code", "Enter your PIN", True),
        ("key", "Name of the key to press, such as Enter", False),
        ("key", "The key of the entry in the dictionary", False),
        ("sort", "The sort key, such as date", False),
        ("keyword", "The keyword to search for", False),
        ("pinned", "Only pinned messages", False),
        ("pin_tab", "Whether to pin the tab", False),
        ("gpio", "The GPIO pin to read", False),
        ("seed", "The random seed", False),
        ("country_code", "The ISO country code", False),
        ("task", "The id of the task, such as task-sk-1", False),
        ("max_tokens", "How many tokens to generate", False),
        ("author", "Who wrote it", False),
        ("city", "The city", False),
        ("id", "The pk_id of the row", False),  # a primary key, no publishable key
        ("mode", "Skip or sk-learn", False),
        ("sort", "The sk_attribute of the table", False),
        ("x", "Looks like sk-proj-... or sk-ant-...", True),
        ("x", "Such as sk_test_4eC39HqLyjWDarjtT1zdp7dc", True),
        ("x", "Such as rk_live_...", True),
        ("x", "A ghp_... or github_pat_... string", True),
        ("x", "Starts with xoxb-", True),
    ],
)
def test_a_credential_argument_is_known_by_its_name_or_its_description(
    name: str, description: str, secret: bool
) -> None:
    assert secret_argument(name, description) is secret


@pytest.mark.parametrize("query", ["read the file notes.txt", "list the files"])
async def test_without_a_working_directory_a_path_is_never_asked_for_and_the_refusal_says_to_send_it(
    query: str,
) -> None:
    message = await refusal(query, cwd=None)  # "notes.txt" was said; asking again would only be read the same way
    assert "give an absolute path, or send currentWorkingDirectory" in message, message


def test_a_relative_path_typed_with_no_working_directory_is_invalid_input_not_sent_unresolved() -> None:
    tools = catalog_of(tool("read_file", "Read a file", {"path": {"type": "string"}, "n": CITY}, "path", "n"))
    read_file = tools.get("demo__read_file")
    assert read_file is not None
    filling = fill(read_file, analyse(task("read a file", cwd=None)))
    asked = asking(read_file, filling, "sure", "it cannot fill `path`", base="/srv")
    assert isinstance(asked, Ask)
    unread = needs(asked, "asks", Plan(backend="demo", tool="read_file", arguments={}, planner="offline"), [], None)
    assert unread.answered({"path": "/etc/hosts", "n": "x"}) == {"path": "/etc/hosts", "n": "x"}
    with pytest.raises(InvalidInput, match="give an absolute path, or send currentWorkingDirectory"):
        unread.answered({"path": "notes.txt", "n": "x"})
