"""Ad-hoc tasks, results a model can look at, and project watching, through the runner as shipped."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.exceptions import MCPError

from .support import Workspace, connect, group_alive, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def blocks(result: types.CallToolResult, kind: type[Any]) -> list[Any]:
    return [block for block in result.content if isinstance(block, kind)]


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    with anyio.fail_after(60):
        return await session.call_tool(name, arguments or {}, **kwargs)


async def test_an_ad_hoc_task_runs_arbigent_run_task_and_reports_like_a_scenario_run(workspace: Workspace) -> None:
    messages: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    goal = "check that the login screen shows an error for a wrong password"
    async with connect(workspace) as session:
        result = await call(session, "run-arbigent-task", {"goal": goal, "maxStep": 5}, progress_callback=progress)
    assert not result.is_error, text_of(result)
    [start] = workspace.starts()
    assert start["argv"][:2] == ["run", "task"] and start["argv"][-2:] == ["--", goal]
    assert "--max-step=5" in start["argv"] and not any(a.startswith("--project-file") for a in start["argv"])
    assert text_of(result).startswith(f"PASSED: the AI agent achieved the task {goal!r}")
    assert result.structured_content["scenarios"] == [{"id": "task", "success": True}]
    assert any("starting arbigent for the task" in m for m in messages)
    assert any("All scenarios completed successfully" in m for m in messages)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, 'run-arbigent-task needs {"goal"'),
        ({"goal": "  "}, 'run-arbigent-task needs {"goal"'),
        ({"goal": "x", "maxStep": 0}, "maxStep must be a whole number from 1 to 1000"),
        ({"goal": "x", "maxRetry": True}, "maxRetry must be a whole number from 0 to 100"),
        ({"goal": "x", "tags": "smoke"}, "does not take tags; it takes deviceId, goal, maxRetry, maxStep"),
    ],
)
async def test_a_task_with_bad_arguments_is_an_error_and_runs_nothing(
    workspace: Workspace, arguments: dict[str, Any], message: str
) -> None:
    async with connect(workspace) as session:
        result = await session.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(name="run-arbigent-task", arguments=arguments)),
            types.CallToolResult,
        )
    assert result.is_error and message in text_of(result)
    assert workspace.starts() == []


async def test_a_task_past_the_timeout_is_stopped_and_reported(workspace: Workspace) -> None:
    async with connect(workspace, "--timeout", "1", env={"FAKE_ARBIGENT_HANG": "1"}) as session:
        result = await call(session, "run-arbigent-task", {"goal": "open settings"})
    assert result.is_error and result.structured_content["status"] == "timeout"
    [start] = workspace.starts()
    assert not group_alive(start["pgid"])
    assert workspace.records()[-1] == {"pid": start["pid"], "exit": 143}


async def test_a_task_queues_behind_a_scenario_run_in_the_same_directory(workspace: Workspace) -> None:
    seen: list[str] = []
    results: dict[str, Any] = {}

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async def run(name: str, arguments: dict[str, Any], callback: Any = None) -> None:
        results[name] = await call(session, name, arguments, progress_callback=callback)

    async with connect(workspace, env={"FAKE_ARBIGENT_STEP_DELAY": "0.2"}) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "run-arbigent-test-login", {}, progress)
            await wait_for(lambda: any("scenario has been started" in m for m in seen))
            tg.start_soon(run, "run-arbigent-task", {"goal": "open settings"}, progress)
            await wait_for(lambda: any(m.startswith("queued: another arbigent run") for m in seen))
    assert not results["run-arbigent-test-login"].is_error and not results["run-arbigent-task"].is_error
    order = [("start" if "argv" in r else "exit", r["pid"]) for r in workspace.records()]
    assert [kind for kind, _ in order] == ["start", "exit", "start", "exit"]


async def test_a_failing_scenario_comes_back_with_its_last_screenshot_and_its_files(workspace: Workspace) -> None:
    async with connect(workspace, env={"FAKE_ARBIGENT_FAIL": "checkout"}) as session:
        result = await call(session, "run-arbigent-test-purchase")
        [image] = blocks(result, types.ImageContent)
        links = {link.uri: link for link in blocks(result, types.ResourceLink)}
        listed = {resource.uri: resource for resource in (await session.list_resources()).resources}
        run_id = result.structured_content["runId"]
        [shot] = result.structured_content["screenshots"]
        read_image = await session.read_resource(shot["uri"])
        read_result = await session.read_resource(f"arbigent://runs/{run_id}/result.yml")
        with pytest.raises(MCPError) as missing:
            await session.read_resource(f"arbigent://runs/{run_id}/screenshots/../../../etc/passwd")
    assert result.is_error and text_of(result).startswith("FAILED: 1 of 1 scenario(s) failed: checkout")
    assert image.mime_type == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    assert shot == {"scenarioId": "checkout", "uri": shot["uri"], "attached": True}
    assert f"Screenshot of the last step of checkout: attached ({shot['uri']})" in text_of(result)
    expected = {f"arbigent://runs/{run_id}/result.yml", f"arbigent://runs/{run_id}/report.html", shot["uri"]}
    assert set(links) == expected
    assert links[shot["uri"]].mime_type == "image/png"
    assert expected <= set(listed)
    assert len([uri for uri in listed if "/screenshots/" in uri]) == 4 * 3 * 2, "4 attempts x 3 tasks x 2 steps"
    [blob] = read_image.contents
    assert isinstance(blob, types.BlobResourceContents) and blob.blob == image.data
    [yml] = read_result.contents
    assert isinstance(yml, types.TextResourceContents) and "id: checkout" in yml.text
    assert missing.value.code == -32002


async def test_the_runs_files_are_listed_in_pages(workspace: Workspace) -> None:
    """Two failing runs keep 2 x (2 + 24) files: more than one page of 50."""
    async with connect(workspace, env={"FAKE_ARBIGENT_FAIL": "checkout"}) as session:
        for _ in range(2):
            await call(session, "run-arbigent-test-purchase")
        first = await session.list_resources()
        second = await session.list_resources(params=types.PaginatedRequestParams(cursor=first.next_cursor))
        with pytest.raises(MCPError) as refused:
            await session.list_resources(params=types.PaginatedRequestParams(cursor="page 2"))
    assert (len(first.resources), len(second.resources), second.next_cursor) == (50, 2, None)
    assert len({r.uri for r in [*first.resources, *second.resources]}) == 52
    assert refused.value.error.code == types.INVALID_PARAMS and "nextCursor" in refused.value.error.message


async def test_a_screenshot_over_the_size_limit_is_named_instead_of_attached(workspace: Workspace) -> None:
    env = {"FAKE_ARBIGENT_FAIL": "task", "FAKE_ARBIGENT_SCREENSHOT_BYTES": "700000"}
    async with connect(workspace, env=env) as session:
        result = await call(session, "run-arbigent-task", {"goal": "open settings", "maxRetry": 0})
    assert result.is_error and blocks(result, types.ImageContent) == []
    [shot] = result.structured_content["screenshots"]
    assert shot["attached"] is False
    assert (
        f"not attached, 700,000 bytes is over the 600,000 bytes left for images in this result; read {shot['uri']}"
        in (text_of(result))
    )
    assert shot["uri"] in {link.uri for link in blocks(result, types.ResourceLink)}


async def test_re_pointing_a_symlinked_project_file_changes_the_tools(workspace: Workspace) -> None:
    first, second = workspace.root / "first.yaml", workspace.root / "second.yaml"
    first.write_text(workspace.project.read_text())
    second.write_text('scenarios:\n- id: "search"\n  goal: "Search."\n  tags:\n  - name: "search"\n')
    link = workspace.root / "current.yaml"
    link.symlink_to(first)
    workspace.project = link
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(workspace, message_handler=on_message) as session:
        assert "run-arbigent-test-login" in {t.name for t in (await session.list_tools()).tools}
        replacement = workspace.root / "next.yaml"
        replacement.symlink_to(second)
        replacement.replace(link)  # atomically re-point, as deploy tools do
        with anyio.fail_after(20):
            await changed.wait()
        names = {t.name for t in (await session.list_tools()).tools}
        result = await call(session, "run-arbigent-test-search")
    assert "run-arbigent-test-search" in names and "run-arbigent-test-login" not in names
    assert not result.is_error, text_of(result)
    assert f"--project-file={link}" in workspace.starts()[0]["argv"]


REFERENCE_SETTINGS = """\
# the "Full example settings file" and the scoped example of arbigent-cli-reference.md (0.77.0)
project-file: e2e/project.yaml
ai-type: openai
openai-endpoint: https://api.openai.com/v1/
openai-api-key: sk-reference-example-key
openai-model-name: gpt-4.1
os: android
log-level: info
run:
  log-level: debug
  task:
    max-step: 15
include-app-ui-structure: true
"""


async def test_a_settings_file_written_as_the_arbigent_reference_documents_it_runs(workspace: Workspace) -> None:
    workspace.config.write_text(REFERENCE_SETTINGS)
    async with connect(workspace) as session:
        tagged = await call(session, "run-arbigent-test-login")
        task = await call(session, "run-arbigent-task", {"goal": "open settings"})
    assert not tagged.is_error, text_of(tagged)
    assert not task.is_error, text_of(task)
    run_argv, task_argv = (start["argv"] for start in workspace.starts())
    assert "--log-level=debug" in run_argv and "--max-step=15" in task_argv and "--log-level=info" in task_argv
    assert not any(arg.startswith(("--task", "--include-app-ui-structure", "--openai-api-key")) for arg in run_argv)
