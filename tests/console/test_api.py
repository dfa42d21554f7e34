"""The console's JSON API, auth, Host and Origin checks and redaction, against one real gateway
(filesystem server and fake backend, scripted model) shared by the tests of this module."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from agentify.console.security import SUBPROTOCOL, token_subprotocol
from tests.conftest import API_KEY, ENV_SECRET, fake_backend, fs_backend, gateway_env, text_of, write_config
from tests.console.conftest import TOKEN, Console, console_gateway, make_workspace
from tests.fakes.model_server import ModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
async def console(tmp_path_factory: pytest.TempPathFactory, scripted_model: ModelServer) -> AsyncIterator[Console]:
    root = tmp_path_factory.mktemp("console-api")
    workspace = make_workspace(root / "workspace")
    backends = [
        fs_backend(workspace, env={"FS_API_TOKEN": ENV_SECRET}),
        fake_backend("fake", description="echoes text", env={"FAKE_PASSWORD": "another-env-secret-99"}),
    ]
    config = write_config(root, backends, pinning="off")  # the pins routes with pinning on: test_pinned_tools.py
    env = gateway_env(scripted_model, AGENTIFY_DEBUG_TOKEN=TOKEN)
    async with console_gateway(config, env, root / "stderr.log") as running:
        running.workspace = workspace
        yield running


async def read_notes(console: Console) -> dict[str, Any]:
    cwd = str(console.workspace)
    return await console.post_task({"query": "read notes.txt", "context": {"currentWorkingDirectory": cwd}})


def trace_id_of(result: dict[str, Any]) -> str:
    meta = result["_meta"]
    trace_id: str = (meta.get("agentify/plan") or meta["agentify/error"])["traceId"]
    return trace_id


# ----- auth, Host, Origin --------------------------------------------------------------------


async def test_the_token_is_accepted_only_as_a_bearer_header_and_no_cookie_is_ever_set(console: Console) -> None:
    async with console.http() as client:
        by_header = await client.get("/api/status", headers={"Authorization": f"Bearer {TOKEN}"})
        by_query = await client.get("/api/status", params={"token": TOKEN})
        page = await client.get("/", params={"token": TOKEN})
        by_old_cookie = await client.get("/api/status", headers={"Cookie": f"agentify_console_{console.port}={TOKEN}"})
    assert by_header.status_code == 200
    assert page.status_code == 200
    # A token in a URL ends up in histories and logs, and a cookie goes to every port of 127.0.0.1.
    assert by_query.status_code == 401 and by_old_cookie.status_code == 401
    assert all("set-cookie" not in r.headers for r in (by_header, by_query, page, by_old_cookie))


@pytest.mark.parametrize(
    "path",
    [
        "/api/status",
        "/api/traces",
        "/api/config",
        "/api/logs",
        "/api/backends",
        "/api/tools",
        "/api/confirmations",
        "/api/pins",
        "/api/audit",
    ],
)
async def test_every_api_request_without_the_token_is_401_and_with_a_wrong_one_403(console: Console, path: str) -> None:
    async with console.http() as client:
        missing = await client.get(path)
        wrong_header = await client.get(path, headers={"Authorization": "Bearer not-the-token"})
        wrong_scheme = await client.get(path, headers={"Authorization": f"Basic {TOKEN}"})
        posts = [
            await client.post(action, json=body)
            for action, body in (
                ("/api/tasks", {"query": "read notes.txt"}),
                ("/api/tools/call", {"name": "fake__echo", "arguments": {"text": "hi"}}),
                ("/api/confirmations/any", {"answer": "accept"}),
                ("/api/backends/fs/restart", None),
                ("/api/pins/fs/approve", None),
            )
        ]
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "token" in missing.json()["detail"]
    assert wrong_header.status_code == 403
    assert wrong_scheme.status_code == 401
    assert [post.status_code for post in posts] == [401] * len(posts)


@pytest.mark.parametrize("path", ["/", "/ui/console.js", "/ui/console.css", "/openapi.json", "/docs"])
async def test_the_page_shell_and_the_api_description_need_no_token_and_carry_no_data(
    console: Console, path: str
) -> None:
    async with console.http() as client:
        response = await client.get(path)
        foreign = await client.get(path, headers={"Host": f"evil.example:{console.port}"})
    assert response.status_code == 200
    assert TOKEN not in response.text and str(console.workspace) not in response.text
    assert "set-cookie" not in response.headers
    assert foreign.status_code == 400  # the Host check still holds


async def test_a_websocket_takes_the_token_as_a_header_or_subprotocol_and_never_echoes_it(console: Console) -> None:
    url = f"ws://127.0.0.1:{console.port}/ws"

    def offer(token_protocol: str) -> list[Subprotocol]:
        return [Subprotocol(SUBPROTOCOL), Subprotocol(token_protocol)]

    with pytest.raises(InvalidStatus) as missing:
        async with connect(url):
            pass
    with pytest.raises(InvalidStatus) as by_query:
        async with connect(f"{url}?token={TOKEN}"):
            pass
    with pytest.raises(InvalidStatus) as wrong:
        async with connect(url, subprotocols=offer(token_subprotocol("not-the-token"))):
            pass
    with pytest.raises(InvalidStatus) as garbled:
        async with connect(url, subprotocols=offer("agentify-token.%%%")):
            pass
    assert missing.value.response.status_code == 401 and by_query.value.response.status_code == 401
    assert wrong.value.response.status_code == 403 and garbled.value.response.status_code == 403
    async with connect(url, subprotocols=offer(token_subprotocol(TOKEN))) as ws:
        assert ws.subprotocol == SUBPROTOCOL  # the browser requires one back; never the token's
        assert json.loads(await ws.recv())["kind"] == "snapshot"
    async with console.websocket() as ws:  # a non-browser client sends the header
        assert ws.subprotocol is None
        assert json.loads(await ws.recv())["kind"] == "snapshot"


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "evil.example", "127.0.0.1:1", "localhost.evil.example:{port}"]
)
async def test_an_unexpected_host_header_is_refused_even_with_the_token(console: Console, host: str) -> None:
    async with console.http() as client:
        response = await client.get("/api/status", headers=console.auth | {"Host": host.format(port=console.port)})
    assert response.status_code == 400
    assert "Host" in response.json()["detail"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}"])
async def test_the_console_answers_to_its_own_names(console: Console, host: str) -> None:
    async with console.http() as client:
        response = await client.get("/api/status", headers=console.auth | {"Host": host.format(port=console.port)})
    assert response.status_code == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1:{port}"])
async def test_a_websocket_upgrade_from_a_foreign_origin_is_refused(console: Console, origin: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with console.websocket(origin=origin.format(port=console.port)):
            pass
    assert refused.value.response.status_code == 403
    async with console.http() as client:  # the same rule for plain requests, e.g. a cross-site POST
        response = await client.post(
            "/api/tasks", json={"query": "x"}, headers=console.auth | {"Origin": "http://evil.example"}
        )
    assert response.status_code == 403


async def test_a_websocket_from_the_console_page_origin_is_accepted(console: Console) -> None:
    for origin in (f"http://127.0.0.1:{console.port}", f"http://localhost:{console.port}"):
        async with console.websocket(origin=origin) as ws:
            assert json.loads(await ws.recv())["kind"] == "snapshot"


# ----- endpoints -----------------------------------------------------------------------------


async def test_status_reports_version_uptime_planner_and_task_counts(console: Console) -> None:
    before = (await console.get("/api/status"))["tasks"]
    await read_notes(console)
    status = await console.get("/api/status")
    assert status["version"] == "0.1.0" and status["uptimeSeconds"] >= 0 and status["pid"] > 0
    assert status["planner"]["name"] == "openai" and "API key" in status["planner"]["reason"]
    assert status["tasks"]["total"] == before["total"] + 1 and status["tasks"]["ok"] == before["ok"] + 1
    assert status["tasks"]["running"] == 0
    assert status["console"]["url"] == console.url + "/"


async def test_backends_show_state_pid_tools_restarts_and_stderr(console: Console) -> None:
    await read_notes(console)  # both backends have started by the time a task ran
    backends = {b["id"]: b for b in await console.get("/api/backends")}
    fs, fake = backends["fs"], backends["fake"]
    assert fs["state"] == "ready" and fs["pid"] > 0 and fs["restarts"] == 0 and fs["lastError"] is None
    assert {"read_text_file", "list_directory"} <= set(fs["tools"])
    assert fake["description"] == "echoes text" and "echo" in fake["tools"]
    assert "fake backend starting" in fake["stderrTail"]
    assert fs["enabled"] is True


async def test_config_is_the_effective_config_with_the_api_key_and_every_env_value_masked(console: Console) -> None:
    config = await console.get("/api/config")
    assert config["planner"]["apiKey"] == "[REDACTED]"
    assert config["planner"]["baseUrl"].startswith("http://127.0.0.1:")
    envs = {b["id"]: b["env"] for b in config["backends"]}
    assert envs == {"fs": {"FS_API_TOKEN": "[REDACTED]"}, "fake": {"FAKE_PASSWORD": "[REDACTED]"}}
    assert config["debugPort"] == console.port and config["debugHost"] == "127.0.0.1"


async def test_logs_are_filtered_by_level_and_limited(console: Console) -> None:
    await console.post_task({"query": ""})  # logs a WARNING: task failed (invalid_input)
    everything = await console.get("/api/logs", params={"limit": 2000})
    warnings = await console.get("/api/logs", params={"level": "warning", "limit": 2000})
    two = await console.get("/api/logs", params={"limit": 2})
    assert {"INFO", "WARNING"} <= {record["level"] for record in everything}
    assert warnings and all(record["level"] in ("WARNING", "ERROR", "CRITICAL") for record in warnings)
    assert two == everything[-2:] or len(two) == 2  # newer records may have arrived in between
    assert {"time", "level", "logger", "message", "extra"} <= set(everything[0])
    assert any(r["message"].startswith("debug console: http://127.0.0.1") for r in everything)
    async with console.http() as client:
        bad = await client.get("/api/logs", params={"level": "LOUD"}, headers=console.auth)
        too_many = await client.get("/api/logs", params={"limit": 5000}, headers=console.auth)
    assert bad.status_code == 422 and "unknown level" in bad.text
    assert too_many.status_code == 422


async def test_a_task_posted_to_the_console_runs_like_orchestrate_task_and_leaves_a_trace(console: Console) -> None:
    result = await read_notes(console)
    assert not result.get("isError") and result["content"] == [{"type": "text", "text": "remember the milk\n"}]
    plan = result["_meta"]["agentify/plan"]
    assert plan["backend"] == "fs" and plan["tool"] == "read_text_file" and plan["planner"] == "openai"
    trace = await console.get(f"/api/traces/{plan['traceId']}")
    assert trace["status"] == "ok" and trace["kind"] == "orchestrate" and trace["durationMs"] > 0
    assert trace["input"]["query"] == "read notes.txt"
    spans = {span["name"]: span for span in trace["spans"]}
    assert list(spans) == ["validate", "plan", "tools/call read_text_file"]
    expected_plan = {
        "agentify.planner": "openai",
        "gen_ai.request.model": "gpt-5.4-mini",  # the configured model (the scripted server answers any)
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 12,
        "agentify.backend": "fs",
        "gen_ai.tool.name": "read_text_file",
        "gen_ai.tool.call.arguments": {"path": f"{console.workspace}/notes.txt"},
    }
    assert {key: spans["plan"]["attributes"].get(key) for key in expected_plan} == expected_plan
    call = spans["tools/call read_text_file"]
    assert "error.type" not in call["attributes"] and call["attributes"]["agentify.result.chars"] > 0
    assert call["attributes"]["gen_ai.tool.call.result"] == "remember the milk\n"
    assert call["attributes"]["mcp.method.name"] == "tools/call" and call["attributes"]["network.transport"] == "pipe"
    assert all(span["durationMs"] is not None for span in trace["spans"])
    assert any("plan: fs.read_text_file" in record["message"] for record in trace["logs"])
    assert (await console.get("/api/traces", params={"limit": 1}))[0]["traceId"] == plan["traceId"]
    only_this = await console.get("/api/logs", params={"trace": plan["traceId"]})
    assert only_this and all(r["extra"]["trace"] == plan["traceId"] for r in only_this)


async def test_an_invalid_task_is_an_invalid_input_result_with_its_trace(console: Console) -> None:
    result = await console.post_task({"query": "   "})
    assert result["isError"] is True
    assert result["_meta"]["agentify/error"]["code"] == "invalid_input"
    trace = await console.get(f"/api/traces/{trace_id_of(result)}")
    assert trace["status"] == "error" and trace["error"]["code"] == "invalid_input"
    assert trace["spans"][0]["name"] == "validate" and "empty" in trace["spans"][0]["error"]
    not_an_object = await console.post_task(["read", "notes.txt"])
    assert not_an_object["_meta"]["agentify/error"]["code"] == "invalid_input"


async def test_each_tool_is_listed_with_its_schema_and_whether_a_call_asks_first(console: Console) -> None:
    fs_tools = {tool["tool"]: tool for tool in await console.get("/api/tools", params={"backend": "fs"})}
    everything = {tool["name"] for tool in await console.get("/api/tools")}
    write = fs_tools["write_file"]
    assert write["name"] == "fs__write_file" and write["backend"] == "fs"
    assert write["inputSchema"]["required"] == ["path", "content"] and write["annotations"]["destructiveHint"] is True
    assert write["confirm"] == "fs.write_file is marked destructive by its server"
    assert fs_tools["read_text_file"]["confirm"] is None
    assert {"fs__read_text_file", "fake__echo"} <= everything and set(fs_tools) < {t.split("__")[1] for t in everything}


async def call(console: Console, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with console.http() as client:
        response = await client.post(
            "/api/tools/call", json={"name": name, "arguments": arguments}, headers=console.auth
        )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_tool_called_from_the_console_goes_the_way_of_call_tool(console: Console) -> None:
    echoed = await call(console, "fake__echo", {"text": "hi"})
    assert echoed["content"] == [{"type": "text", "text": "echo: hi"}] and echoed["structuredContent"] == {
        "echoed": "hi"
    }
    assert echoed["_meta"]["agentify/plan"]["planner"] == "ide"
    trace = await console.get(f"/api/traces/{trace_id_of(echoed)}")
    assert trace["kind"] == "call" and trace["input"] == {"name": "fake__echo", "arguments": {"text": "hi"}}
    misspelt = await call(console, "fake__ecko", {"text": "hi"})
    assert (
        misspelt["_meta"]["agentify/error"]["code"] == "invalid_input"
        and "fake__echo" in misspelt["content"][0]["text"]
    )
    wrong = await call(console, "fake__echo", {"txt": "hi"})
    assert "input schema of fake__echo" in wrong["content"][0]["text"]


async def test_a_destructive_call_from_the_console_runs_only_once_accepted_in_the_console(console: Console) -> None:
    assert console.workspace is not None
    target = console.workspace / "written.txt"
    answers: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    async def write_and_answer(answer: str, content: str) -> None:
        async with anyio.create_task_group() as tg:

            async def write() -> None:
                results.append(await call(console, "fs__write_file", {"path": str(target), "content": content}))

            tg.start_soon(write)
            question = await console.open_confirmation()
            answers.append(question)
            assert not target.exists() or target.read_text() != content  # it waits for the answer
            async with console.http() as client:
                posted = await client.post(
                    f"/api/confirmations/{question['id']}", json={"answer": answer}, headers=console.auth
                )
                again = await client.post(
                    f"/api/confirmations/{question['id']}", json={"answer": answer}, headers=console.auth
                )
                nonsense = await client.post("/api/confirmations/x", json={"answer": "maybe"}, headers=console.auth)
            assert posted.status_code == 200 and again.status_code == 404 and nonsense.status_code == 422

    await write_and_answer("accept", "first")
    await write_and_answer("decline", "second")
    assert target.read_text() == "first"
    assert f"path: {target}" in answers[0]["message"] and answers[0]["backend"] == "fs"
    assert not results[0].get("isError") and "Successfully wrote" in results[0]["content"][0]["text"]
    assert results[1]["_meta"]["agentify/error"]["code"] == "denied"
    assert "you declined the confirmation for fs.write_file" in results[1]["content"][0]["text"]
    assert await console.get("/api/confirmations") == []


async def test_a_call_whose_backend_result_is_an_error_is_a_failed_task(console: Console) -> None:
    assert console.workspace is not None
    before = (await console.get("/api/status"))["tasks"]
    result = await call(console, "fs__read_text_file", {"path": str(console.workspace / "missing.txt")})
    assert result["isError"] is True
    trace = await console.get(f"/api/traces/{trace_id_of(result)}")
    assert trace["status"] == "error" and trace["error"]["code"] == "tool_error"
    assert "ENOENT" in trace["error"]["message"]
    after = (await console.get("/api/status"))["tasks"]
    assert after["error"] == before["error"] + 1 and after["ok"] == before["ok"]


async def test_with_pinning_off_and_no_audit_their_routes_say_not_enabled(console: Console) -> None:
    assert await console.get("/api/pins") == {"enabled": False, "tools": []}
    assert await console.get("/api/audit") == {"enabled": False, "records": []}  # no server.audit over stdio
    async with console.http() as client:
        approve = await client.post("/api/pins/fs/approve", headers=console.auth)
    assert approve.status_code == 409 and "pinning is not enabled" in approve.json()["detail"]


async def test_an_unknown_trace_is_404(console: Console) -> None:
    async with console.http() as client:
        response = await client.get("/api/traces/0123456789abcdef", headers=console.auth)
    assert response.status_code == 404 and "no trace" in response.json()["detail"]


async def test_a_task_from_the_ide_shows_up_in_the_console(console: Console) -> None:
    assert console.session is not None
    result = await console.session.call_tool(
        "orchestrate_task", {"query": "read notes.txt", "context": {"currentWorkingDirectory": str(console.workspace)}}
    )
    assert text_of(result) == "remember the milk\n"
    trace_id = (result.meta or {})["agentify/plan"]["traceId"]
    trace = await console.get(f"/api/traces/{trace_id}")
    assert trace["status"] == "ok" and [s["name"] for s in trace["spans"]] == [
        "validate",
        "plan",
        "tools/call read_text_file",
    ]


async def test_the_openapi_docs_are_served_behind_the_token(console: Console) -> None:
    schema = await console.get("/openapi.json")
    assert {
        "/api/status",
        "/api/backends",
        "/api/config",
        "/api/logs",
        "/api/traces",
        "/api/traces/{trace_id}",
        "/api/tasks",
        "/api/tools",
        "/api/tools/call",
        "/api/confirmations",
        "/api/confirmations/{question_id}",
        "/api/backends/{backend_id}/restart",
        "/api/pins",
        "/api/pins/{backend_id}/approve",
        "/api/audit",
    } <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"  # /docs offers Authorize
    async with console.http() as client:
        docs = await client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


async def test_the_page_is_served_with_headers_that_keep_it_to_itself(console: Console) -> None:
    async with console.http() as client:
        page = await client.get("/")
        script = await client.get("/ui/console.js")
    assert page.status_code == 200 and "<title>agentify debug console</title>" in page.text
    assert script.status_code == 200 and "new WebSocket" in script.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY" and page.headers["referrer-policy"] == "no-referrer"
    assert "http://" not in page.text.replace("http-equiv", "")  # nothing loaded from elsewhere


# ----- the WebSocket -------------------------------------------------------------------------


async def test_the_websocket_sends_a_snapshot_then_live_trace_and_log_events(console: Console) -> None:
    async with console.websocket() as ws:
        snapshot = json.loads(await ws.recv())
        assert snapshot["kind"] == "snapshot"
        assert set(snapshot["data"]) == {"status", "backends", "logs", "traces", "confirmations"}
        assert {b["id"] for b in snapshot["data"]["backends"]} == {"fs", "fake"}
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_notes, console)
            trace_states: list[str] = []
            log_lines: list[str] = []
            with anyio.fail_after(30):
                while "ok" not in trace_states or not any("plan: fs.read_text_file" in m for m in log_lines):
                    event = json.loads(await ws.recv())
                    if event["kind"] == "trace" and event["data"]["input"].get("query") == "read notes.txt":
                        trace_states.append(event["data"]["status"])
                    if event["kind"] == "log" and event["data"]["extra"].get("trace"):
                        log_lines.append(event["data"]["message"])
    assert trace_states[0] == "running" and trace_states[-1] == "ok"


# ----- secrets -------------------------------------------------------------------------------


async def test_secrets_never_appear_in_anything_the_console_serves(console: Console) -> None:
    secrets = (API_KEY, ENV_SECRET, "another-env-secret-99", TOKEN)
    result = await console.post_task({"query": f"echo {ENV_SECRET} and {API_KEY}"})
    assert result["content"][0]["text"] == "echo: [REDACTED] and [REDACTED]", result
    trace_id = trace_id_of(result)
    served = [json.dumps(result)]
    for path in (
        "/api/status",
        "/api/backends",
        "/api/config",
        "/api/traces",
        f"/api/traces/{trace_id}",
        "/api/tools",
        "/openapi.json",
    ):
        served.append(json.dumps(await console.get(path)))
    served.append(json.dumps(await console.get("/api/logs", params={"level": "TRACE", "limit": 2000})))
    async with console.websocket() as ws:
        served.append(await ws.recv())
    served_text = "\n".join(served)
    assert "echo" in served_text and trace_id in served_text  # the task is in there, only masked
    for secret in secrets:
        assert secret not in served_text
