"""`agentify connect`: an IDE's real MCP file moved behind agentify and back, run as a user types it,
with HOME and XDG pointed at a temporary folder (the real home is never touched)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTIFY, FS_SERVER

pytestmark = pytest.mark.integration

TOKEN = "ghp_connect-secret-token-0042"
HEADER = "Bearer remote-header-secret-77"

CURSOR = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN},
        },
        "remote": {"url": "https://example.invalid/mcp", "headers": {"Authorization": HEADER}},
        "fs": {"command": "node", "args": [str(FS_SERVER), "."]},
    }
}

VSCODE = """{
  // VS Code's own file: comments, trailing commas and inputs, as its docs show
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true},
  ],
  "servers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${input:gh-token}"}, /* asked for once */
    },
  },
}
"""


def run(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_", "XDG_"))}
    env = base | {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return subprocess.run(
        [str(AGENTIFY), "connect", *args],
        env=env,
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def write(path: Path, text: str, mode: int = 0o644) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path.read_bytes()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cursor_servers_move_into_agentify_and_undo_restores_both_files_byte_for_byte(home: Path) -> None:
    ide_file = home / ".cursor" / "mcp.json"
    original = write(ide_file, json.dumps(CURSOR, indent=4))
    config_file = home / ".config" / "agentify" / "cursor.json"
    existing = {"planner": {"provider": "offline"}, "mcpServers": {"remote": {"url": "https://other.invalid/mcp"}}}
    config_before = write(config_file, json.dumps(existing))

    done = run(home, "cursor")
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr and "remote-header-secret" not in done.stdout + done.stderr
    assert "'remote' as 'remote-cursor'" in done.stdout

    ide: dict[str, Any] = json.loads(ide_file.read_text())
    assert list(ide["mcpServers"]) == ["agentify"]
    entry = ide["mcpServers"]["agentify"]
    assert entry["command"] == str(AGENTIFY) and entry["args"] == ["serve", "--config", str(config_file)]
    config: dict[str, Any] = json.loads(config_file.read_text())
    assert config["planner"] == {"provider": "offline"}
    servers = config["mcpServers"]
    assert servers["github"] == CURSOR["mcpServers"]["github"]  # env and its secret kept
    assert servers["remote-cursor"] == CURSOR["mcpServers"]["remote"]  # headers kept, clash renamed
    assert servers["remote"] == existing["mcpServers"]["remote"]
    assert mode(config_file) == 0o600

    undone = run(home, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert ide_file.read_bytes() == original and mode(ide_file) == 0o644
    assert config_file.read_bytes() == config_before


def test_the_moved_servers_are_served_by_agentify(home: Path) -> None:
    """What connect writes is a config agentify loads: its doctor starts the moved filesystem server."""
    project = home / "project"
    (project / "docs").mkdir(parents=True)
    write(project / ".cursor" / "mcp.json", json.dumps({"mcpServers": {"fs": CURSOR["mcpServers"]["fs"]}}))
    assert run(home, "cursor", "--project", str(project)).returncode == 0
    config_file = project / ".agentify" / "cursor.json"
    entry = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["agentify"]
    assert entry["args"][-1] == str(config_file)

    doctor = subprocess.run(
        [entry["command"], "doctor", "--config", str(config_file)],
        env={k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))} | {"HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "read_text_file" in doctor.stdout


def test_vscode_project_file_with_comments_and_inputs(home: Path) -> None:
    project = home / "project"
    ide_file = project / ".vscode" / "mcp.json"
    original = write(ide_file, VSCODE)

    dry = run(home, "vscode", "--project", str(project), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert '+    "agentify": {' in dry.stdout and "dry run: nothing was written" in dry.stdout
    assert ide_file.read_bytes() == original and not (project / ".agentify").exists()

    assert run(home, "vscode", "--project", str(project)).returncode == 0
    ide = json.loads(ide_file.read_text())
    assert ide["inputs"][0]["id"] == "gh-token"  # VS Code still asks for it
    entry = ide["servers"]["agentify"]
    assert entry["type"] == "stdio"
    assert entry["env"] == {"AGENTIFY_INPUT_GH_TOKEN": "${input:gh-token}"}
    moved = json.loads((project / ".agentify" / "vscode.json").read_text())["mcpServers"]["github"]
    assert moved["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${AGENTIFY_INPUT_GH_TOKEN}"}

    again = run(home, "vscode", "--project", str(project))
    assert again.returncode == 2 and "already connected" in again.stderr

    assert run(home, "--undo", "vscode", "--project", str(project)).returncode == 0
    assert ide_file.read_bytes() == original and not (project / ".agentify" / "vscode.json").exists()


def test_dry_run_masks_the_secrets_it_shows(home: Path) -> None:
    write(home / ".cursor" / "mcp.json", json.dumps(CURSOR))
    dry = run(home, "cursor", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert '"GITHUB_PERSONAL_ACCESS_TOKEN": "[REDACTED]"' in dry.stdout
    assert TOKEN not in dry.stdout and "remote-header-secret" not in dry.stdout


def test_claude_desktop_file_under_xdg_and_an_edit_after_connect_is_kept_on_undo(home: Path) -> None:
    ide_file = home / "dotfiles" / "claude_desktop_config.json"
    original = write(ide_file, json.dumps({"mcpServers": {"github": CURSOR["mcpServers"]["github"]}, "theme": "dark"}))
    link = home / ".config" / "Claude" / "claude_desktop_config.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(ide_file)
    assert run(home, "claude").returncode == 0
    assert link.is_symlink()  # the dotfiles' link stays; the file it points to is rewritten
    assert json.loads(ide_file.read_text())["theme"] == "dark"
    edited = ide_file.read_text().replace('"dark"', '"light"')
    ide_file.write_text(edited)

    undone = run(home, "--undo", "claude")
    assert undone.returncode == 0, undone.stderr
    assert ide_file.read_bytes() == original
    aside = [p for p in ide_file.parent.iterdir() if ".before-undo-" in p.name]
    assert [p.read_text() for p in aside] == [edited] and "was edited after" in undone.stdout


def test_bad_input_is_one_line_and_changes_nothing(home: Path) -> None:
    broken = write(home / ".codeium" / "windsurf" / "mcp_config.json", '{"mcpServers": {"a": ')
    done = run(home, "windsurf")
    assert done.returncode == 2
    assert "is not valid JSON" in done.stderr and "Traceback" not in done.stderr
    assert (home / ".codeium" / "windsurf" / "mcp_config.json").read_bytes() == broken
    assert not (home / ".config" / "agentify").exists()

    no_project = run(home, "windsurf", "--project", str(home))
    assert no_project.returncode == 2 and "no project-level MCP file" in no_project.stderr
    nothing = run(home, "--undo")
    assert nothing.returncode == 2 and "connected: none" in nothing.stderr


def test_vscode_input_ids_that_spell_one_variable_never_share_a_secret(home: Path) -> None:
    project = home / "project"
    servers = {
        name: {"command": "npx", "args": ["-y", name], "env": {"TOKEN": f"${{input:{input_id}}}"}}
        for name, input_id in [("a", "gh.token"), ("b", "gh_token"), ("c", "gh-token"), ("d", "GH_TOKEN")]
    }
    write(project / ".vscode" / "mcp.json", json.dumps({"servers": servers}))
    done = run(home, "vscode", "--project", str(project))
    assert done.returncode == 0, done.stderr
    entry_env = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]["agentify"]["env"]
    moved = json.loads((project / ".agentify" / "vscode.json").read_text())["mcpServers"]
    asked = {name: entry_env[moved[name]["env"]["TOKEN"][2:-1]] for name in servers}
    assert asked == {name: server["env"]["TOKEN"] for name, server in servers.items()}
    assert len(entry_env) == 4


def test_vscode_input_id_agentify_cannot_pass_is_refused_and_nothing_is_written(home: Path) -> None:
    project = home / "project"
    text = json.dumps({"servers": {"a": {"command": "npx", "env": {"TOKEN": "${input:weird id}"}}}})
    original = write(project / ".vscode" / "mcp.json", text)
    done = run(home, "vscode", "--project", str(project))
    assert done.returncode == 2 and "'weird id'" in done.stderr and "Traceback" not in done.stderr
    assert (project / ".vscode" / "mcp.json").read_bytes() == original
    assert not (project / ".agentify").exists()


def test_deeply_nested_ide_file_is_a_clear_error(home: Path) -> None:
    original = write(home / ".cursor" / "mcp.json", '{"a":' + "[" * 200_000)
    done = run(home, "cursor")
    assert done.returncode == 2 and "nests deeper than 64 levels" in done.stderr and "Traceback" not in done.stderr
    assert (home / ".cursor" / "mcp.json").read_bytes() == original


CLAUDE_KEY = "sk-proj-claude-only-secret-0099"


@pytest.mark.parametrize("order", [("vscode", "claude"), ("claude", "vscode")])
def test_each_ide_gets_its_own_config_and_undo_in_any_order_leaves_no_secret_behind(
    home: Path, order: tuple[str, str]
) -> None:
    vscode_file = home / ".config" / "Code" / "User" / "mcp.json"
    claude_file = home / ".config" / "Claude" / "claude_desktop_config.json"
    originals = {
        "vscode": write(vscode_file, VSCODE),
        "claude": write(
            claude_file,
            json.dumps({"mcpServers": {"openai": {"command": "npx", "env": {"OPENAI_API_KEY": CLAUDE_KEY}}}}),
        ),
    }
    assert run(home, "vscode").returncode == 0
    assert run(home, "claude").returncode == 0
    configs = {
        "vscode": json.loads(vscode_file.read_text())["servers"]["agentify"]["args"][-1],
        "claude": json.loads(claude_file.read_text())["mcpServers"]["agentify"]["args"][-1],
    }
    assert configs["vscode"] != configs["claude"]
    assert list(json.loads(Path(configs["vscode"]).read_text())["mcpServers"]) == ["github"]
    assert list(json.loads(Path(configs["claude"]).read_text())["mcpServers"]) == ["openai"]

    for ide in order:
        undone = run(home, "--undo", ide)
        assert undone.returncode == 0, undone.stderr
    assert vscode_file.read_bytes() == originals["vscode"] and claude_file.read_bytes() == originals["claude"]
    holding = [p for p in home.rglob("*") if p.is_file() and CLAUDE_KEY.encode() in p.read_bytes()]
    assert holding == [claude_file]
    assert not any(Path(c).exists() for c in configs.values())


def test_a_second_ide_is_refused_the_config_of_the_first(home: Path) -> None:
    write(home / ".cursor" / "mcp.json", json.dumps(CURSOR))
    claude = write(home / ".config" / "Claude" / "claude_desktop_config.json", json.dumps({"mcpServers": {}}))
    shared = home / "shared.json"
    assert run(home, "cursor", "--config", str(shared)).returncode == 0
    refused = run(home, "claude", "--config", str(shared))
    assert refused.returncode == 2 and "already holds the servers of cursor" in refused.stderr
    assert (home / ".config" / "Claude" / "claude_desktop_config.json").read_bytes() == claude


def agentify_in(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_", "XDG_"))}
    env = base | {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "AGENTIFY_PLANNER": "offline"}
    return subprocess.run(
        [str(AGENTIFY), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL
    )


def test_doctor_without_config_uses_the_file_connect_wrote_and_says_so(home: Path) -> None:
    elsewhere = home / "somewhere"
    elsewhere.mkdir()
    searched = agentify_in(home, elsewhere, "doctor")
    assert searched.returncode == 1
    assert str(elsewhere / "agentify.json") in searched.stderr
    assert str(home / ".config" / "agentify" / "agentify.json") in searched.stderr

    write(home / ".cursor" / "mcp.json", json.dumps({"mcpServers": {"fs": CURSOR["mcpServers"]["fs"]}}))
    assert run(home, "cursor").returncode == 0
    connected = home / ".config" / "agentify" / "cursor.json"
    done = agentify_in(home, elsewhere, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"config: {connected}" in done.stderr and "read_text_file" in done.stdout

    (elsewhere / "agentify.json").write_text(json.dumps({"backends": []}))
    here = agentify_in(home, elsewhere, "doctor")
    assert f"config: {elsewhere / 'agentify.json'}" in here.stderr and "no backends configured" in here.stdout

    write(home / ".codeium" / "windsurf" / "mcp_config.json", json.dumps({"mcpServers": {}}))
    assert run(home, "windsurf").returncode == 0
    (elsewhere / "agentify.json").unlink()
    several = agentify_in(home, elsewhere, "run", "list files")
    assert several.returncode == 2 and "one config per IDE" in several.stderr and "windsurf.json" in several.stderr


def test_connect_cline_rewrites_its_settings_file_in_vs_codes_global_storage(home: Path) -> None:
    settings = home / ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
    cline = (Path(__file__).parents[1] / "fixtures/ide_configs/cline/cline_mcp_settings.json").read_text()
    original = write(settings, cline)
    done = run(home, "cline")
    assert done.returncode == 0, done.stderr
    entry = json.loads(settings.read_text())["mcpServers"]["agentify"]
    config = home / ".config" / "agentify" / "cline.json"
    assert entry["args"] == ["serve", "--config", str(config)]
    assert json.loads(config.read_text())["mcpServers"] == json.loads(cline)["mcpServers"]
    assert run(home, "--undo", "cline").returncode == 0
    assert settings.read_bytes() == original


ARGUMENT_SECRETS = ["sk-proj-argument-secret-1", "tok-equals-secret-22", "hunter2-password", "env-style-secret-333"]


def test_dry_run_masks_secrets_passed_as_command_arguments(home: Path) -> None:
    args = ["-y", "some-server", "--api-key", ARGUMENT_SECRETS[0], f"--token={ARGUMENT_SECRETS[1]}"]
    args += ["--password", ARGUMENT_SECRETS[2], f"API_KEY={ARGUMENT_SECRETS[3]}", "--auth-type", "oauth"]
    write(home / ".cursor" / "mcp.json", json.dumps({"mcpServers": {"s": {"command": "npx", "args": args}}}))
    dry = run(home, "cursor", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert not [s for s in ARGUMENT_SECRETS if s in dry.stdout], dry.stdout
    assert '"--api-key",' in dry.stdout and '"oauth"' in dry.stdout  # the names stay readable
