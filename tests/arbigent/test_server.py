"""The runner as shipped: `python -m agentify.arbigent` over stdio, driven by the official MCP client."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.exceptions import MCPError

from .support import (
    EXAMPLES,
    MODEL_FROM_CONFIG,
    SECRET_KEY,
    VERSIONS,
    Workspace,
    connect,
    group_alive,
    wait_for,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.parametrize("cli_version", VERSIONS, indirect=True),
]

RUN_RESULT_KEYS = {"status", "exitCode", "scenarios", "resultFile", "reportFile", "durationMs"}
RUN_RESULT_KEYS |= {"runId", "screenshots", "stdoutTail", "stderrTail"}


class ProgressLog:
    """Collects progress notifications of one call; `seen(text)` waits for a message containing it."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.messages: list[str] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        self.messages.append(message or "")

    def has(self, text: str) -> bool:
        return any(text in message for message in self.messages)

    async def seen(self, text: str) -> None:
        await wait_for(lambda: self.has(text))


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    with anyio.fail_after(60):
        return await session.call_tool(name, arguments or {}, **kwargs)


async def test_tools_are_derived_from_the_project_tags(workspace: Workspace, cli_version: str) -> None:
    async with connect(workspace) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    check = {"check-arbigent-project"} if cli_version != "0.77.0" else set()
    assert set(tools) == check | {
        "run-arbigent-test-all",
        "run-arbigent-test-smoke",
        "run-arbigent-test-login",
        "run-arbigent-test-purchase",
        "run-arbigent-test-settings",
        "run-arbigent-scenarios",
        "run-arbigent-task",
        "list-arbigent-scenarios",
    }
    assert "'purchase'" in (tools["run-arbigent-test-purchase"].description or "")
    assert "checkout (after launch-app -> login)" in (tools["run-arbigent-test-purchase"].description or "")
    ids_schema = tools["run-arbigent-scenarios"].input_schema["properties"]["scenarioIds"]
    assert ids_schema["items"]["enum"] == ["launch-app", "login", "checkout", "settings-dark-mode"]


async def test_a_tag_tool_runs_the_cli_with_exactly_the_argv_it_expects(workspace: Workspace) -> None:
    async with connect(workspace) as session:
        result = await call(session, "run-arbigent-test-login")
    assert not result.is_error, text_of(result)
    [start] = workspace.starts()
    assert start["argv"] == [
        "run",
        f"--project-file={workspace.project}",
        "--tags=login",
        "--ai-type=openai",
        f"--openai-model-name={MODEL_FROM_CONFIG}",
        "--log-level=info",
    ]
    assert start["env"]["OPENAI_API_KEY"] == hashlib.sha256(SECRET_KEY.encode()).hexdigest()
    assert start["stdin"] == "devnull"
    assert start["cwd"] == str(workspace.root.resolve())
    assert start["pgid"] == start["pid"] == start["sid"]


async def test_a_passing_run_returns_the_documented_structured_content(workspace: Workspace) -> None:
    async with connect(workspace) as session:
        result = await call(session, "run-arbigent-test-login")
    content = result.structured_content
    assert set(content) == RUN_RESULT_KEYS
    assert content["status"] == "passed"
    assert content["exitCode"] == 0
    assert content["scenarios"] == [{"id": "login", "success": True}]
    assert content["resultFile"] == str(workspace.root.resolve() / "arbigent-result" / "result.yml")
    assert content["reportFile"] == str(workspace.root.resolve() / "arbigent-result" / "report.html")
    assert text_of(result).startswith("PASSED: 1 scenario(s) passed: login (tag 'login',")
    assert content["runId"] and content["screenshots"] == []
    assert content["stdoutTail"].rstrip().endswith("report.html") and content["stderrTail"] == ""


async def test_every_stdout_line_arrives_as_progress_with_the_scenario_position(workspace: Workspace) -> None:
    progress = ProgressLog()
    async with connect(workspace) as session:
        await call(session, "run-arbigent-test-all", progress_callback=progress)
    assert progress.values == sorted(set(progress.values)), "progress must increase with every notification"
    assert progress.has("Selected scenarios for execution: [checkout, settings-dark-mode]")
    assert progress.has("scenario 1 of 2: ")
    assert progress.has("scenario 2 of 2: ")
    assert progress.has("🔄 Running: checkout - task: 3/3")


async def test_a_failing_scenario_comes_back_as_an_error_naming_it(workspace: Workspace) -> None:
    async with connect(workspace, env={"FAKE_ARBIGENT_FAIL": "checkout"}) as session:
        result = await call(session, "run-arbigent-test-purchase")
    assert result.is_error
    assert text_of(result).startswith("FAILED: 1 of 1 scenario(s) failed: checkout")
    assert result.structured_content["status"] == "failed"
    assert result.structured_content["exitCode"] == 1
    assert result.structured_content["scenarios"] == [{"id": "checkout", "success": False}]


async def test_scenario_ids_are_passed_as_scenario_ids(workspace: Workspace) -> None:
    async with connect(workspace) as session:
        result = await call(session, "run-arbigent-scenarios", {"scenarioIds": ["settings-dark-mode", "login"]})
        unknown = await call(session, "run-arbigent-scenarios", {"scenarioIds": ["ghost"]})
    assert not result.is_error, text_of(result)
    assert workspace.starts()[0]["argv"][2] == "--scenario-ids=settings-dark-mode,login"
    assert unknown.is_error
    assert "unknown scenario id(s): ghost" in text_of(unknown)
    assert len(workspace.starts()) == 1


async def test_listing_scenarios_shows_chains_and_what_each_tool_selects(workspace: Workspace) -> None:
    async with connect(workspace) as session:
        result = await call(session, "list-arbigent-scenarios")
    listing = result.structured_content
    checkout = next(s for s in listing["scenarios"] if s["id"] == "checkout")
    assert checkout["chain"] == ["launch-app", "login", "checkout"]
    assert {"name": "run-arbigent-test-smoke", "tag": "smoke", "selects": ["login"]} in listing["tools"]
    assert workspace.starts() == []


async def test_cancelling_a_call_stops_the_run_and_leaves_no_process_behind(workspace: Workspace) -> None:
    progress = ProgressLog()
    async with connect(workspace, env={"FAKE_ARBIGENT_HANG": "1"}) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: call(session, "run-arbigent-test-login", progress_callback=progress))
            await progress.seen("scenario has been started")
            tg.cancel_scope.cancel()
        [start] = workspace.starts()
        await wait_for(lambda: not group_alive(start["pgid"]))
        assert {"pid": start["pid"], "exit": 143} in workspace.records()
        assert not (await call(session, "list-arbigent-scenarios")).is_error


async def test_sigterm_to_the_runner_kills_a_run_at_once_and_leaves_no_process_behind(workspace: Workspace) -> None:
    progress = ProgressLog()
    stubborn = {"FAKE_ARBIGENT_HANG": "1", "FAKE_ARBIGENT_IGNORE_SIGTERM": "1", "AGENTIFY_ARBIGENT_GRACE_SECONDS": "60"}
    async with connect(workspace, env=stubborn) as session:
        async with anyio.create_task_group() as tg:

            async def doomed_call() -> None:
                with contextlib.suppress(MCPError):
                    await call(session, "run-arbigent-test-login", progress_callback=progress)

            tg.start_soon(doomed_call)
            await progress.seen("scenario has been started")
            [start] = workspace.starts()
            os.kill(start["ppid"], signal.SIGTERM)
            await wait_for(lambda: not group_alive(start["pgid"]), seconds=10)
            tg.cancel_scope.cancel()


async def test_a_run_past_the_timeout_is_stopped_and_reported(workspace: Workspace) -> None:
    async with connect(workspace, "--timeout", "1", env={"FAKE_ARBIGENT_HANG": "1"}) as session:
        result = await call(session, "run-arbigent-test-login")
    assert result.is_error
    assert text_of(result).startswith("TIMED OUT: the arbigent run for tag 'login' was stopped after 1 s")
    assert result.structured_content["status"] == "timeout"
    [start] = workspace.starts()
    assert not group_alive(start["pgid"])
    assert workspace.records()[-1] == {"pid": start["pid"], "exit": 143}


async def test_a_second_run_in_the_same_directory_waits_and_says_it_is_queued(workspace: Workspace) -> None:
    first, second = ProgressLog(), ProgressLog()
    results: dict[str, Any] = {}

    async def run(name: str, progress: ProgressLog) -> None:
        results[name] = await call(session, name, progress_callback=progress)

    async with connect(workspace, env={"FAKE_ARBIGENT_STEP_DELAY": "0.2"}) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "run-arbigent-test-login", first)
            await first.seen("scenario has been started")
            tg.start_soon(run, "run-arbigent-test-settings", second)
            await second.seen("queued: another arbigent run is using")
    assert not results["run-arbigent-test-login"].is_error
    assert not results["run-arbigent-test-settings"].is_error
    starts_and_exits = [("start" if "argv" in r else "exit", r["pid"]) for r in workspace.records()]
    first_pid, second_pid = (r["pid"] for r in workspace.starts())
    assert starts_and_exits == [("start", first_pid), ("exit", first_pid), ("start", second_pid), ("exit", second_pid)]


async def test_big_output_is_cut_in_the_middle_and_the_cut_is_stated(workspace: Workspace) -> None:
    async with connect(workspace, env={"FAKE_ARBIGENT_BIG_OUTPUT": "400000"}) as session:
        result = await call(session, "run-arbigent-test-login")
    text = text_of(result)
    assert not result.is_error
    assert "characters cut from the middle of this output" in text
    assert len(text) < 50_000
    assert "I: 🟢 login: Success" in text
    assert result.structured_content["scenarios"] == [{"id": "login", "success": True}]


async def test_editing_the_project_changes_the_tools_and_a_broken_edit_keeps_them(workspace: Workspace) -> None:
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(workspace, message_handler=on_message) as session:
        await session.list_tools()
        workspace.project.write_text(
            workspace.project.read_text() + '- id: "search"\n  goal: "Search."\n  tags:\n  - name: "search"\n'
        )
        with anyio.fail_after(20):
            await changed.wait()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert "run-arbigent-test-search" in names

        workspace.project.write_text("scenarios:\n- id: a\n  goal: Log in: now\n")
        await wait_for(lambda: "keeping the last good tools" in workspace.stderr())
        assert {tool.name for tool in (await session.list_tools()).tools} == names
        assert "line 3, column 15" in workspace.stderr()

        # Nested deeper than any project: refused in one line, the runner alive with its last good tools.
        # (80,000 `[` stop at libyaml's own limit of 1,000 where it has one, else at agentify's of 100.)
        for nested in (500, 80_000):
            before = len(workspace.stderr())
            workspace.project.write_text("scenarios: " + "[" * nested + "]" * min(nested, 500) + "\n")
            await wait_for(lambda before=before: "nest" in workspace.stderr()[before:])  # type: ignore[misc]
            assert {tool.name for tool in (await session.list_tools()).tools} == names
        assert "nested more than 100 levels" in workspace.stderr()


async def test_nothing_from_the_config_reaches_stderr_and_keys_are_masked_in_results(workspace: Workspace) -> None:
    echo_key = {"FAKE_ARBIGENT_ECHO_KEY": "1"}
    async with connect(workspace, "--log-level", "debug", env=echo_key) as session:
        result = await call(session, "run-arbigent-test-login")
    stderr = workspace.stderr()
    assert "Using AI API key" in stderr, "the echoed key line is logged, masked"
    assert SECRET_KEY not in stderr
    assert MODEL_FROM_CONFIG not in stderr
    assert "--openai-model-name=<config>" in stderr
    assert "config key 'tags' is ignored" in stderr
    assert SECRET_KEY not in text_of(result)
    assert "Using AI API key [REDACTED]" in text_of(result)


async def test_the_example_project_serves_its_tags_and_runs_the_login_tests(workspace: Workspace) -> None:
    workspace.project = EXAMPLES / "arbigent-project.yaml"
    workspace.config = EXAMPLES / "arbigent-config.yaml"
    args = ("--working-directory", str(workspace.root))
    async with connect(workspace, *args, env={"OPENAI_API_KEY": "test-key"}) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        result = await call(session, "run-arbigent-test-login")
    assert {f"run-arbigent-test-{tag}" for tag in ("login", "smoke", "purchase", "settings")} <= names
    assert not result.is_error, text_of(result)
    assert "--tags=login" in workspace.starts()[0]["argv"]
    assert result.structured_content["scenarios"] == [
        {"id": "login-wrong-password", "success": True},
        {"id": "logout", "success": True},
    ]


async def test_keys_the_schema_refuses_are_refused_not_ignored(workspace: Workspace) -> None:
    async with connect(workspace) as session:
        tag = await call(session, "run-arbigent-test-login", {"x": 1})
        task = await call(session, "run-arbigent-task", {"goal": "check the login", "maxStpe": 3})
        listed = await call(session, "list-arbigent-scenarios", {"verbose": True})
    assert tag.is_error and "run-arbigent-test-login does not take x; it takes deviceId" in text_of(tag)
    assert task.is_error and "does not take maxStpe; it takes deviceId, goal, maxRetry, maxStep" in text_of(task)
    assert listed.is_error and "does not take verbose" in text_of(listed)
    assert workspace.starts() == []  # nothing was run
