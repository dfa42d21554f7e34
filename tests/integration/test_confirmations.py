"""A confirmation holds once: for the question asked, in the round it was asked, within its time.

2026-07-28 clients answer questions in `inputResponses` beside a sealed `requestState`; these tests
do the round trips by hand (`allow_input_required=True`), as a hostile client would, because the
SDK's own `Client` never replays or guesses. 2025-11-25 clients answer server-to-client requests.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import error_code, fs_backend, gateway_env, text_of, wait_until, write_config
from tests.integration.ide_client import LOGGED_MODES, MODES, answering, era_of, ide_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ACCEPT = types.ElicitResult(action="accept", content={})


def write_call(target: Path, content: str = "new text") -> dict[str, Any]:
    return {"name": "fs__write_file", "arguments": {"path": str(target), "content": content}}


async def ask(client: Any, arguments: dict[str, Any], **round_trip: Any) -> Any:
    return await client.session.call_tool("call_tool", arguments, allow_input_required=True, **round_trip)


async def confirmation_of(client: Any, arguments: dict[str, Any]) -> tuple[str, str]:
    """(question id, sealed state) of the confirmation that a destructive call asks for."""
    asked = await ask(client, arguments)
    assert isinstance(asked, types.InputRequiredResult), asked
    ((key, request),) = (asked.input_requests or {}).items()
    assert isinstance(request, types.ElicitRequest)
    assert asked.request_state is not None
    return key, asked.request_state


async def never_called(context: Any, params: Any) -> Any:
    """Declares a capability; these tests answer by hand."""
    raise AssertionError("the round trips are driven by hand")


async def test_an_accepted_confirmation_runs_the_call_once_and_a_replay_is_refused(
    tmp_path: Path, workspace: Path
) -> None:
    target = workspace / "out.txt"
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", "auto", elicitation_callback=never_called
    ) as client:
        key, state = await confirmation_of(client, write_call(target))
        accepted = await ask(client, write_call(target), input_responses={key: ACCEPT}, request_state=state)
        assert isinstance(accepted, types.CallToolResult) and not accepted.is_error, accepted
        assert target.read_text() == "new text"
        target.unlink()
        replays = [
            await ask(client, write_call(target), input_responses={key: ACCEPT}, request_state=state) for _ in range(3)
        ]
        # The same round without the answer is a new question, not the old confirmation.
        again = await ask(client, write_call(target), request_state=state)
    for replay in replays:
        assert isinstance(replay, types.CallToolResult) and error_code(replay) == "invalid_input", replay
        assert "already used" in text_of(replay)
    assert not target.exists()
    assert isinstance(again, types.InputRequiredResult)
    assert list(again.input_requests or {}) != [key]


async def test_an_answer_sent_with_the_first_call_is_refused_in_the_2026_era(tmp_path: Path, workspace: Path) -> None:
    """No state, no question: an answer that nobody asked for never stands for the user."""
    target = workspace / "out.txt"
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", "auto", elicitation_callback=never_called
    ) as client:
        key, _ = await confirmation_of(client, write_call(target))  # what a client could learn or guess
        unsolicited = await ask(client, write_call(target), input_responses={key: ACCEPT})
    assert isinstance(unsolicited, types.CallToolResult) and error_code(unsolicited) == "invalid_input"
    assert "requestState" in text_of(unsolicited)
    assert not target.exists()


async def test_an_answer_sent_with_the_call_is_ignored_in_the_2025_era(tmp_path: Path, workspace: Path) -> None:
    target = workspace / "out.txt"
    config = write_config(tmp_path, [fs_backend(workspace)])
    asked: list[types.ElicitRequestParams] = []
    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", "legacy", elicitation_callback=answering("decline", asked)
    ) as client:
        result = await client.session.call_tool(
            "call_tool", write_call(target), input_responses={"elicitation-create-x": ACCEPT}
        )
    assert error_code(result) == "denied" and "declined" in text_of(result)
    assert len(asked) == 1 and not target.exists()


async def test_an_answer_to_another_question_does_not_confirm_this_one(tmp_path: Path, workspace: Path) -> None:
    """The IDE's model plans (sampling), and its answer comes with a confirmation from an earlier task: the
    user is still asked about this one."""
    target = workspace / "planned.txt"
    use = types.ToolUseContent(
        type="tool_use", id="t1", name="fs__write_file", input={"path": str(target), "content": "from the IDE"}
    )
    sampled = types.CreateMessageResultWithTools(role="assistant", content=[use], model="ide", stop_reason="toolUse")
    task = {"query": "write 'from the IDE' to planned.txt"}
    config = write_config(tmp_path, [fs_backend(workspace)])
    async with ide_client(
        config,
        gateway_env(None),
        tmp_path / "e.log",
        "auto",
        sampling_callback=never_called,
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()),
        elicitation_callback=never_called,
    ) as client:

        async def orchestrate(**round_trip: Any) -> Any:
            return await client.session.call_tool("orchestrate_task", task, allow_input_required=True, **round_trip)

        async def round_trip(previous: types.InputRequiredResult, extra: dict[str, Any]) -> Any:
            requests = (previous.input_requests or {}).items()
            answers = {k: ACCEPT if isinstance(r, types.ElicitRequest) else sampled for k, r in requests}
            return await orchestrate(input_responses=answers | extra, request_state=previous.request_state)

        first = await orchestrate()
        confirm = await round_trip(first, {})  # a first task, confirmed by the user: its answer is known
        ((confirm_key, _),) = (confirm.input_requests or {}).items()
        done = await round_trip(confirm, {})
        assert not done.is_error, text_of(done)
        target.unlink()

        second = await orchestrate()
        skipped = await round_trip(second, {confirm_key: ACCEPT})
    assert isinstance(skipped, types.InputRequiredResult), skipped
    ((_, request),) = (skipped.input_requests or {}).items()
    assert isinstance(request, types.ElicitRequest)
    assert not target.exists()


async def answer_late_in_the_2026_era(client: Any, target: Path, seconds: float) -> None:
    key, state = await confirmation_of(client, write_call(target))
    asked_at = time.monotonic()
    with anyio.fail_after(seconds + 10):
        while time.monotonic() - asked_at <= seconds + 0.5:  # noqa: ASYNC110 - what runs out is the clock
            await anyio.sleep(0.1)
    with pytest.raises(MCPError) as raised:
        await ask(client, write_call(target), input_responses={key: ACCEPT}, request_state=state)
    assert "expired" in str(raised.value)


@pytest.mark.parametrize("mode", MODES + LOGGED_MODES)
async def test_an_answer_after_the_confirmation_timed_out_runs_nothing(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    target = workspace / "out.txt"
    trace_file = tmp_path / "traces.jsonl"
    config = write_config(tmp_path, [fs_backend(workspace)], confirmTimeoutSeconds=1, traceFile=str(trace_file))
    answered = anyio.Event()

    async def answer_after_the_gateway_gave_up(context: Any, params: Any) -> types.ElicitResult:
        with anyio.CancelScope(shield=True):  # the gateway cancels its question when it gives up
            await wait_until(lambda: trace_file.exists() and '"denied"' in trace_file.read_text())
        answered.set()
        return ACCEPT

    async with ide_client(
        config, gateway_env(None), tmp_path / "e.log", mode, elicitation_callback=answer_after_the_gateway_gave_up
    ) as client:
        if era_of(mode) == "auto":
            await answer_late_in_the_2026_era(client, target, 1)
        else:
            timed_out = await client.session.call_tool("call_tool", write_call(target))
            with anyio.fail_after(30):
                await answered.wait()
            assert error_code(timed_out) == "denied", text_of(timed_out)
            assert "within 1 s" in text_of(timed_out) and "confirmTimeoutSeconds" in text_of(timed_out)
        listing = await client.session.call_tool(
            "call_tool", {"name": "fs__list_directory", "arguments": {"path": str(workspace)}}
        )
    assert not target.exists()
    assert "notes.txt" in text_of(listing)
