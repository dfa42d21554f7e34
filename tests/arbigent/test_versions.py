"""The CLI as people have it: which version it is, the device a run uses, the wrapper, and the project lint.

Through the runner as shipped (`python -m agentify.arbigent` driven by the MCP client), against the
fake acting as 0.77.0, 0.81.1 or a build from main after 0.81.1 (NEWEST).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from mcp.client.session import ClientSession

from agentify.arbigent.errors import StartupError
from agentify.arbigent.executable import find_arbigent
from agentify.arbigent.options import MAIN, NEWEST, V0_77, V0_81, table_for

from .support import FAKE_ARBIGENT, Workspace, connect, install_release
from .support import NEWEST as NEWEST_FAKE

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TWO_DEVICES = {"FAKE_ARBIGENT_DEVICES": "emulator-5554,emulator-5556"}
SHA256 = "0" * 64


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None) -> Any:
    with anyio.fail_after(60):
        return await session.call_tool(name, arguments or {})


def device_used(workspace: Workspace) -> str:
    """The device result.yml says the run's steps were taken on."""
    data = yaml.safe_load((workspace.root / "arbigent-result" / "result.yml").read_text())
    return str(data["scenarios"][0]["histories"][0]["agentResults"][0]["deviceName"])


def use(workspace: Workspace, version: str) -> Workspace:
    workspace.binary = install_release(workspace.root.parent / "install", version)
    return workspace


def runner(workspace: Workspace, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The runner with stdin at EOF: it runs its start-up checks, serves nothing and exits."""
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | workspace.env(**(env or {}))
    return subprocess.run(
        [sys.executable, *workspace.runner_args(*args)],
        env=environment,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


# ----- devices ----------------------------------------------------------------------------------


async def test_a_current_cli_with_two_devices_runs_the_login_tests_on_the_one_named(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace, env=TWO_DEVICES) as session:
        result = await call(session, "run-arbigent-test-login", {"deviceId": "emulator-5556"})
    assert not result.is_error, text_of(result)
    [start] = workspace.starts()
    assert start["argv"][-1] == "--device-id=emulator-5556"
    assert device_used(workspace) == "emulator-5556"
    assert "Selected device: emulator-5556 (requested via --device-id)" in text_of(result)


async def test_two_devices_and_none_named_fail_with_the_ids_and_what_to_pass(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace, env=TWO_DEVICES) as session:
        result = await call(session, "run-arbigent-test-login")
    assert result.is_error
    assert text_of(result).startswith(
        "FAILED: nothing ran (tag 'login'): several devices are connected and arbigent will not guess which one to "
        "use (emulator-5554, emulator-5556). Call the tool again with deviceId set to one of them"
    )
    assert result.structured_content["devices"] == ["emulator-5554", "emulator-5556"]


async def test_the_runners_device_id_is_every_runs_device_unless_the_call_names_one(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace, "--device-id", "emulator-5556", env=TWO_DEVICES) as session:
        await call(session, "run-arbigent-test-login")
        first = device_used(workspace)
        task = await call(session, "run-arbigent-task", {"goal": "open settings", "deviceId": "emulator-5554"})
    assert first == "emulator-5556"
    assert not task.is_error, text_of(task)
    argv = workspace.starts()[1]["argv"]
    assert argv[:2] == ["run", "task"] and argv[-3:] == ["--device-id=emulator-5554", "--", "open settings"]
    assert device_used(workspace) == "emulator-5554"


async def test_a_device_that_is_not_connected_is_named_with_the_ones_that_are(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace, env=TWO_DEVICES) as session:
        result = await call(session, "run-arbigent-scenarios", {"scenarioIds": ["login"], "deviceId": "pixel-9"})
    assert result.is_error
    assert "no connected device has the id pixel-9 (connected: emulator-5554, emulator-5556)" in text_of(result)


async def test_0_77_names_an_iphone_and_refuses_to_choose_an_android_device(workspace: Workspace) -> None:
    use(workspace, "0.77.0")
    workspace.config.write_text(workspace.config.read_text() + "  os: ios\n")  # under run:
    iphones = {"FAKE_ARBIGENT_DEVICES": "00008110-AAAA,00008120-BBBB"}
    async with connect(workspace, env=iphones) as session:
        unnamed = await call(session, "run-arbigent-test-login")
        named = await call(session, "run-arbigent-test-login", {"deviceId": "00008120-BBBB"})
        android = await call(session, "run-arbigent-task", {"goal": "open settings", "deviceId": "emulator-5556"})
    assert unnamed.is_error and "several devices are connected" in text_of(unnamed)
    assert unnamed.structured_content["devices"] == ["00008110…", "00008120…"]
    assert not named.is_error, text_of(named)
    assert workspace.starts()[1]["argv"][-1] == "--ios-real-device-id=00008120-BBBB"
    assert device_used(workspace) == "00008120-BBBB"
    assert android.is_error and "arbigent 0.77.0 cannot choose the device for --os=android" in text_of(android)
    assert len(workspace.starts()) == 2, "nothing was started for the refused call"


def test_a_runner_device_id_an_old_cli_cannot_use_stops_start_up(workspace: Workspace) -> None:
    use(workspace, "0.81.1")
    result = runner(workspace, "--device-id", "emulator-5556")
    assert result.returncode == 1 and result.stdout == ""
    assert "--device-id: arbigent 0.81.x cannot choose the device for --os=android" in result.stderr


# ----- the superseded key -------------------------------------------------------------------------


async def test_a_leftover_ios_real_device_id_fails_before_the_run_on_a_current_cli(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace) as session:
        (workspace.root / ".arbigent").mkdir()
        (workspace.root / ".arbigent" / "settings.local.yml").write_text("run:\n  ios-real-device-id: 00008110-AAAA\n")
        result = await call(session, "run-arbigent-test-login")
    assert result.is_error and workspace.starts() == []
    assert "settings.local.yml: 'run.ios-real-device-id' was replaced by 'run.device-id'" in text_of(result)
    assert "rename the key to 'run.device-id'" in text_of(result)


def test_a_config_with_ios_real_device_id_is_refused_for_a_current_cli_and_read_for_0_77(workspace: Workspace) -> None:
    workspace.config.write_text(workspace.config.read_text() + "ios-real-device-id: 00008110-AAAA\n")
    current = runner(use(workspace, NEWEST_FAKE))
    old = runner(use(workspace, "0.77.0"))
    assert current.returncode == 1 and len(current.stderr.splitlines()) == 1
    assert "'ios-real-device-id' was replaced by 'device-id' in arbigent main after 0.81.1" in current.stderr
    assert old.returncode == 0, old.stderr


# ----- the wrapper --------------------------------------------------------------------------------


def make_wrapper(directory: Path, version: str) -> subprocess.CompletedProcess[str]:
    """`arbigent wrapper --version V`, as a project would have run it once (the fake's wrapper needs no network)."""
    return subprocess.run(
        [str(FAKE_ARBIGENT), "wrapper", "--version", version, "--sha256", SHA256, "--dir", str(directory)],
        env=os.environ | {"AGENTIFY_FAKE_PYTHON": sys.executable, "FAKE_ARBIGENT_VERSION": "0.81.1"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


async def test_a_wrapper_only_project_runs_through_its_arbigentw(workspace: Workspace, tmp_path: Path) -> None:
    assert make_wrapper(workspace.root, "0.81.1").returncode == 0
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    workspace.binary = None  # no --arbigent-bin-path, and no arbigent anywhere on PATH
    async with connect(workspace, env={"PATH": f"{empty}:/usr/bin:/bin"}) as session:
        info = session.server_info
        tools = {tool.name for tool in (await session.list_tools()).tools}
        result = await call(session, "run-arbigent-test-login")
    assert info is not None and info.description == (
        f"the project's arbigentw wrapper, pinning arbigent 0.81.1 ({workspace.root / 'arbigentw'})"
    )
    assert "check-arbigent-project" not in tools, "0.81.1 has no sort"
    assert not result.is_error, text_of(result)
    assert "--tags=login" in workspace.starts()[0]["argv"]


def test_arbigent_bin_path_may_point_at_a_wrapper_whose_version_is_read_from_its_properties(tmp_path: Path) -> None:
    assert make_wrapper(tmp_path, "0.81.0").returncode == 0
    found = find_arbigent(str(tmp_path / "arbigentw"), tmp_path / "elsewhere")
    assert (found.path, found.version, found.options, found.wrapper) == (tmp_path / "arbigentw", "0.81.0", V0_81, True)


def test_a_wrapper_without_its_properties_stops_start_up_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert make_wrapper(tmp_path, "0.81.1").returncode == 0
    (tmp_path / "arbigentw.properties").unlink()
    monkeypatch.delenv("ARBIGENT_VERSION", raising=False)
    with pytest.raises(StartupError, match="has no arbigentw.properties beside it.*arbigent wrapper --version"):
        find_arbigent(None, tmp_path)
    monkeypatch.setenv("ARBIGENT_VERSION", "0.77.0")
    assert find_arbigent(None, tmp_path).options is V0_77


# ----- the version --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "table"),
    [
        ("0.77.0", V0_77),
        ("0.76.1", V0_77),
        ("0.80.0", V0_77),
        ("0.81.0", V0_81),
        ("0.81.1", V0_81),
        ("0.81.1-20-g24b7c06", MAIN),
        ("0.81.1-3-gabcdef0.dirty", MAIN),
        ("0.82.0", MAIN),
        ("v1.0.0", MAIN),
        ("nightly", None),
    ],
)
def test_each_version_gets_the_table_of_its_range(version: str, table: object) -> None:
    assert table_for(version) is table


def test_the_version_is_read_from_a_release_a_homebrew_link_or_what_the_user_states(tmp_path: Path) -> None:
    release = install_release(tmp_path, "0.77.0")
    link = tmp_path / "bin-arbigent"
    link.symlink_to(release)
    cellar = tmp_path / "Cellar" / "arbigent" / "0.81.1" / "bin" / "arbigent"
    cellar.parent.mkdir(parents=True)
    cellar.write_text(f"#!/bin/sh\nexec '{FAKE_ARBIGENT}' \"$@\"\n")
    cellar.chmod(0o755)
    assert find_arbigent(str(release), tmp_path).version == "0.77.0"
    assert find_arbigent(str(link), tmp_path).options is V0_77
    assert find_arbigent(str(cellar), tmp_path).version == "0.81.1"
    unknown = find_arbigent(str(FAKE_ARBIGENT), tmp_path)
    assert (unknown.version, unknown.options) == (None, NEWEST)
    assert "of unknown version, run with the options of main after 0.81.1" in unknown.describe()
    assert find_arbigent(str(FAKE_ARBIGENT), tmp_path, "0.77.0").options is V0_77


def test_an_unknown_version_is_said_once_and_gets_the_newest_options(workspace: Workspace) -> None:
    result = runner(workspace, "--log-level", "debug")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("cannot tell which version") == 1
    assert "using the options of the newest supported CLI (main after 0.81.1)" in result.stderr


# ----- check-arbigent-project ---------------------------------------------------------------------

UNSORTED = """\
scenarios:
- id: "login"
  goal: "Log in."
  dependency: "launch-app"
  tags:
  - name: "login"
- id: "launch-app"
  goal: "Launch the app."
"""


async def test_the_project_lint_returns_sort_diff_and_never_changes_the_file(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace) as session:
        sorted_result = await call(session, "check-arbigent-project")
        workspace.project.write_text(UNSORTED)
        unsorted = await call(session, "check-arbigent-project")
    assert not sorted_result.is_error and sorted_result.structured_content["sorted"] is True
    assert text_of(sorted_result).startswith("The project file is already sorted")
    assert not unsorted.is_error, text_of(unsorted)
    assert unsorted.structured_content["sorted"] is False and unsorted.structured_content["exitCode"] == 1
    assert '+- id: "launch-app"' in unsorted.structured_content["diff"].splitlines()
    assert "2 scenarios out of place" in text_of(unsorted)
    assert workspace.project.read_text() == UNSORTED, "sort --diff never rewrites the project file"
    assert all(start["argv"][0] == "sort" and start["argv"][-1] == "--diff" for start in workspace.starts())


async def test_the_project_lint_reports_a_project_the_cli_cannot_sort(workspace: Workspace) -> None:
    use(workspace, NEWEST_FAKE)
    async with connect(workspace) as session:
        workspace.project.unlink()
        result = await call(session, "check-arbigent-project")
    assert result.is_error
    assert "The project lint failed" in text_of(result) and "Project file not found" in text_of(result)
