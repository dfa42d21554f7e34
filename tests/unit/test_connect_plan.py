"""What `agentify connect` would write, computed in process: the merge rules and the JSONC reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentify._common import jsonc
from agentify.connect import ConnectError
from agentify.connect.ides import IDES
from agentify.connect.move import plan

COMMAND = ["/opt/agentify/bin/agentify"]


def connect(ide: str, servers: dict[str, Any], config: dict[str, Any] | None, tmp: Path) -> Any:
    key = IDES[ide].key
    before = json.dumps({key: servers}).encode()
    return plan(
        IDES[ide],
        tmp / "mcp.json",
        tmp / "agentify.json",
        COMMAND,
        before,
        None if config is None else json.dumps(config).encode(),
    )


def test_a_taken_name_gets_the_ide_suffix_and_the_next_free_number(tmp_path: Path) -> None:
    config = {
        "mcpServers": {"gh": {"command": "a"}, "gh-cursor": {"command": "b"}},
        "backends": [{"id": "fs", "command": "c"}],
    }
    change = connect("cursor", {"gh": {"command": "x"}, "fs": {"command": "y"}}, config, tmp_path)
    servers = json.loads(change.config_after)["mcpServers"]
    assert change.renamed == {"gh": "gh-cursor-2", "fs": "fs-cursor"}
    assert servers["gh"] == {"command": "a"} and servers["gh-cursor-2"] == {"command": "x"}
    assert json.loads(change.config_after)["backends"] == config["backends"]


def test_a_server_the_config_already_has_is_not_moved_twice(tmp_path: Path) -> None:
    change = connect("windsurf", {"gh": {"command": "x"}}, {"mcpServers": {"gh": {"command": "x"}}}, tmp_path)
    assert change.already == ["gh"] and change.moved == []
    assert json.loads(change.config_after)["mcpServers"] == {"gh": {"command": "x"}}


def test_an_agentify_entry_is_replaced_and_one_with_another_config_stops_the_command(tmp_path: Path) -> None:
    same = {"command": "/x/agentify", "args": ["serve", "--config", str(tmp_path / "agentify.json")]}
    change = connect("claude", {"agentify": same, "gh": {"command": "x"}}, None, tmp_path)
    assert change.moved == ["gh"]
    assert json.loads(change.ide_after)["mcpServers"]["agentify"]["command"] == COMMAND[0]
    other = {"command": "python", "args": ["-m", "agentify", "serve", "--config", "/elsewhere.json"]}
    with pytest.raises(ConnectError, match="--config /elsewhere.json"):
        connect("claude", {"agentify": other}, None, tmp_path)


def test_secrets_of_env_headers_and_auth_are_collected_for_masking(tmp_path: Path) -> None:
    servers = {
        "a": {"command": "x", "env": {"T": "one"}},
        "b": {"url": "u", "headers": {"H": "two"}, "auth": {"token": "three"}},
    }
    assert sorted(connect("cursor", servers, None, tmp_path).secrets) == ["one", "three", "two"]


def test_jsonc_keeps_strings_and_line_numbers() -> None:
    text = '{\n  // a comment\n  "url": "http://x//y", /* one\n two */\n  "list": [1, 2,],\n  "q": "a,}\\"//",\n}\n'
    assert jsonc.loads(text) == {"url": "http://x//y", "list": [1, 2], "q": 'a,}"//'}
    with pytest.raises(json.JSONDecodeError) as caught:
        jsonc.loads('{\n/* x\n y */\n "a": }')
    assert caught.value.lineno == 4


def test_under_uvx_the_ide_entry_runs_uvx_again_never_a_path_in_uvs_cache(tmp_path: Path) -> None:
    from agentify.connect.launch import uvx_command

    cache = tmp_path / "uv-cache"
    script = cache / "archive-v0" / "5mledyZnvLs75xlCg" / "bin" / "agentify"
    wheel = {"url": "file:///home/me/dist/mcp_agentify-0.1.0-py3-none-any.whl", "archive_info": {}}
    command = uvx_command(script, [cache], wheel, console=False)
    assert command is not None and Path(command[0]).name == "uvx" and command[-1] == "agentify"
    assert command[1:3] == ["--from", "mcp-agentify @ file:///home/me/dist/mcp_agentify-0.1.0-py3-none-any.whl"]
    assert not any(str(cache) in part for part in command)

    git = {"url": "https://example.org/agentify.git", "vcs_info": {"vcs": "git", "requested_revision": "v0.1.0"}}
    from_git = uvx_command(script, [cache], git, console=True)
    assert from_git is not None
    assert from_git[2] == "mcp-agentify[console] @ git+https://example.org/agentify.git@v0.1.0"
    assert uvx_command(script, [cache], None, console=False) == [from_git[0], "--from", "mcp-agentify", "agentify"]
    assert uvx_command(tmp_path / "venv" / "bin" / "agentify", [cache], wheel, console=False) is None
