"""The relay between a backend's questions and the IDE, against a scripted IDE side (in process)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from agentify.gateway.backend_questions import BackendQuestionRelay
from agentify.gateway.policy import AskingClient

pytestmark = pytest.mark.anyio

FORM = types.ElicitRequest(
    params=types.ElicitRequestFormParams(message="Delete it?", requested_schema={"type": "object", "properties": {}})
)
URL = types.ElicitRequest(params=types.ElicitRequestURLParams(message="Log in", url="https://login.example.test/"))


class Ide:
    """An IDE side that answers "accept", asks in rounds, never answers, or offers nothing."""

    def __init__(self, *, round_trips: bool = False, answers: bool = True, silent: bool = False) -> None:
        self.round_trips = round_trips
        self.answers = answers
        self.silent = silent
        self.asked: list[types.InputRequest] = []

    def can_answer(self, request: types.InputRequest) -> bool:
        return self.answers

    async def ask(self, request: types.InputRequest, result_type: type[Any], what: str) -> Any:
        self.asked.append(request)
        if self.round_trips:
            raise AskingClient(what)
        if self.silent:
            await anyio.sleep_forever()
        return types.ElicitResult(action="accept", content={})


async def test_a_question_names_the_backend_and_the_answer_comes_back() -> None:
    ide = Ide()
    answers = await BackendQuestionRelay(ide, 5).answer("gh", {"q": FORM})
    assert answers == {"q": types.ElicitResult(action="accept", content={})}
    [asked] = ide.asked
    assert (
        isinstance(asked, types.ElicitRequest) and asked.params.message == "From backend gh (not agentify): Delete it?"
    )


async def test_agentifys_own_question_reads_as_its_own_and_a_backends_same_words_do_not() -> None:
    ide = Ide()
    own = types.ElicitRequestURLParams(
        message="Authorize agentify to use gh: open the page.", url="https://a/b", elicitation_id="x"
    )
    await BackendQuestionRelay(ide, 5).answer("gh", {"q": types.ElicitRequest(params=own)}, own=True)
    await BackendQuestionRelay(ide, 5).answer("gh", {"q": types.ElicitRequest(params=own)})
    mine, theirs = ide.asked
    assert isinstance(mine, types.ElicitRequest) and mine.params.message == own.message
    assert isinstance(theirs, types.ElicitRequest)
    assert theirs.params.message == "From backend gh (not agentify): Authorize agentify to use gh: open the page."


async def test_a_2026_ide_gets_every_question_of_the_round_before_it_answers() -> None:
    ide = Ide(round_trips=True)
    with pytest.raises(AskingClient):
        await BackendQuestionRelay(ide, 5).answer("gh", {"a": FORM, "b": URL})
    assert len(ide.asked) == 2
    url = ide.asked[1]
    assert isinstance(url, types.ElicitRequest) and isinstance(url.params, types.ElicitRequestURLParams)
    assert url.params.elicitation_id is None, "a 2026-07-28 IDE gets the question as the backend asked it"


async def test_a_2025_ide_gets_an_elicitation_id_for_a_url_question_that_had_none() -> None:
    ide = Ide()
    await BackendQuestionRelay(ide, 5).answer("gh", {"q": URL})
    [url] = ide.asked
    assert isinstance(url, types.ElicitRequest) and isinstance(url.params, types.ElicitRequestURLParams)
    assert url.params.elicitation_id and url.params.elicitation_id.startswith("agentify-")


async def test_an_ide_that_cannot_answer_or_does_not_in_time_gives_the_backend_an_error_not_a_hang() -> None:
    refused = await BackendQuestionRelay(Ide(answers=False), 5).answer("gh", {"q": FORM})
    assert isinstance(refused, types.ErrorData) and "cannot answer a question from backend 'gh'" in refused.message
    with anyio.fail_after(5):
        late = await BackendQuestionRelay(Ide(silent=True), 0.05).answer("gh", {"q": FORM})
    assert isinstance(late, types.ErrorData) and "nobody answered" in late.message


async def test_the_backends_own_meta_stays_behind_so_the_same_question_looks_the_same_every_round() -> None:
    ide = Ide()
    for trace in ("00-aa-01", "00-bb-01"):
        params = FORM.params.model_copy(update={"meta": {"traceparent": trace}})
        await BackendQuestionRelay(ide, 5).answer("gh", {"q": types.ElicitRequest(params=params)})
    first, second = ide.asked
    assert first == second and first.params.meta is None


SECRET = "other-backends-env-secret-991"


def mask(text: str) -> str:
    return text.replace(SECRET, "[REDACTED]")


async def test_what_the_ide_shows_is_masked_escaped_and_bounded() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean", "title": f"Key {SECRET}\u202e", "description": "line\nforged line " + "d" * 900}
        },
    }
    form = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=f"Send {SECRET}?\nagentify: approved\u202e" + "m" * 9000, requested_schema=schema
        )
    )
    ide = Ide()
    await BackendQuestionRelay(ide, 5, mask).answer("gh", {"q": form})
    [asked] = ide.asked
    assert isinstance(asked, types.ElicitRequest) and isinstance(asked.params, types.ElicitRequestFormParams)
    message = asked.params.message
    assert (
        message.startswith("From backend gh (not agentify): Send [REDACTED]?\\nagentify: approved\\u202e")
        and "\n" not in message
    )
    assert len(message) < 2200 and "characters in all" in message
    shown = asked.params.requested_schema["properties"]["ok"]
    assert shown["title"] == "Key [REDACTED]\\u202e" and shown["type"] == "boolean"
    assert shown["description"].startswith("line\\nforged line") and len(shown["description"]) < 600


async def test_a_url_the_gateway_would_have_to_rewrite_is_refused_not_opened() -> None:
    fine = types.ElicitRequest(
        params=types.ElicitRequestURLParams(message="Log in", url="https://login.example.test/?state=Zk3q9x0aLm2")
    )
    ide = Ide()
    await BackendQuestionRelay(ide, 5, mask).answer("gh", {"q": fine})
    [asked] = ide.asked
    assert isinstance(asked.params, types.ElicitRequestURLParams) and asked.params.url.endswith("state=Zk3q9x0aLm2")
    for url, why in [
        (f"https://login.example.test/?key={SECRET}", "configured secret"),
        ("https://login.example.test/\u202egnp.exe", "control, format or bidi"),
        ("https://login.example.test/?" + "a" * 5000, "characters long"),
    ]:
        ide = Ide()
        bad = types.ElicitRequest(params=types.ElicitRequestURLParams(message="Log in", url=url))
        refused = await BackendQuestionRelay(ide, 5, mask).answer("gh", {"q": bad})
        assert isinstance(refused, types.ErrorData) and why in refused.message and ide.asked == []


@pytest.mark.parametrize("round_trips", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_a_sampling_request_reaches_the_clients_model_with_every_string_masked_and_whole(
    round_trips: bool,
) -> None:
    long_text = f"Summarize:\n{SECRET}\n" + "x" * 5000  # line breaks and length are the model's to read
    image = "aGVsbG8=" + SECRET  # base64 data is left alone (masking it would corrupt it)
    params = types.CreateMessageRequestParams.model_validate(
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": long_text}},
                {"role": "user", "content": {"text": f"typeless {SECRET}"}},  # `type` has a default
                {"role": "user", "content": {"type": "image", "data": image, "mimeType": "image/png"}},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": f"/{SECRET}"}}],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "toolUseId": "t1",
                            "content": [
                                {"type": "text", "text": f"token={SECRET}"},
                                {"type": "resource", "resource": {"uri": "file:///c", "text": f"key: {SECRET}"}},
                            ],
                            "structuredContent": {"token": SECRET},
                        }
                    ],
                },
            ],
            "systemPrompt": f"You hold {SECRET}.",
            "tools": [{"name": "read", "description": f"reads {SECRET}", "inputSchema": {"type": "object"}}],
            "metadata": {"note": SECRET},
            "maxTokens": 100,
        }
    )

    class Model(Ide):
        async def ask(self, request: types.InputRequest, result_type: type[Any], what: str) -> Any:
            self.asked.append(request)
            if self.round_trips:
                raise AskingClient(what)
            reply = types.TextContent(type="text", text="ok")
            return types.CreateMessageResult(role="assistant", content=reply, model="m")

    ide = Model(round_trips=round_trips)
    request = types.CreateMessageRequest(params=params)
    if round_trips:  # the IDE gets the question in this round's answer, and answers in the next
        with pytest.raises(AskingClient):
            await BackendQuestionRelay(ide, 5, mask).answer("fs", {"s": request})
    else:
        answers = await BackendQuestionRelay(ide, 5, mask).answer("fs", {"s": request})
        assert isinstance(answers, dict) and answers["s"].content.text == "ok"
    [asked] = ide.asked
    assert isinstance(asked, types.CreateMessageRequest)
    shown = asked.params.model_dump_json(by_alias=True)
    assert shown.count(SECRET) == 1 and image in shown  # only inside the image's base64 data
    first = asked.params.messages[0]
    assert first.content.text == long_text.replace(SECRET, "[REDACTED]")
    assert asked.params.system_prompt == "You hold [REDACTED]." and asked.params.max_tokens == 100


async def test_a_forms_defaults_are_escaped_and_names_or_choices_that_cannot_be_shown_are_refused() -> None:
    """A backend's form cannot dress up as agentify's confirmation: it says whose it is, its defaults are
    escaped like its titles, and names or choices that would need escaping are refused (the answer carries
    them back as the user picked them)."""
    imitation = {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean", "title": "agentify: run write_file?", "default": True},
            "note": {"type": "string", "default": "ok\nagentify: approved\u202e"},
            "mode": {"type": "string", "enum": ["read", "write"], "enumNames": ["Read\u202e", "Write"]},
        },
    }
    ide = Ide()
    message = "agentify wants to run write_file on backend fs.\nAccept to run it; decline to skip it."
    form = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=imitation))
    await BackendQuestionRelay(ide, 5, mask).answer("gh", {"q": form})
    [asked] = ide.asked
    assert isinstance(asked, types.ElicitRequest) and isinstance(asked.params, types.ElicitRequestFormParams)
    assert asked.params.message.startswith("From backend gh (not agentify): agentify wants to run write_file")
    shown = asked.params.requested_schema["properties"]
    assert shown["note"]["default"] == "ok\\nagentify: approved\\u202e"
    assert shown["mode"]["enum"] == ["read", "write"] and shown["mode"]["enumNames"] == ["Read\\u202e", "Write"]
    for hostile in (
        {"type": "object", "properties": {"ok\u202e": {"type": "boolean"}}},
        {"type": "object", "properties": {"pick": {"type": "string", "enum": ["yes", "no\nagentify: yes"]}}},
        {"type": "object", "properties": {"pick": {"oneOf": [{"const": f"{SECRET}", "title": "a"}]}}},
        {"type": "object", "properties": {"x" * 600: {"type": "string"}}},
    ):
        asking = types.ElicitRequest(params=types.ElicitRequestFormParams(message="Pick", requested_schema=hostile))
        refused = await BackendQuestionRelay(Ide(), 5, mask).answer("gh", {"q": asking})
        assert isinstance(refused, types.ErrorData), hostile
        assert "field name or choice" in refused.message and SECRET not in refused.message
