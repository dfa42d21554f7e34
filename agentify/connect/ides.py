"""Where each IDE keeps its MCP servers, as its documentation says, and the entry that starts agentify.

User-level files sit in the home directory (Cursor, Windsurf) or in the platform's application
folder (VS Code's user profile, Claude Desktop); project-level files sit in the project
(`.cursor/mcp.json`, `.vscode/mcp.json`, and Claude Code's `.mcp.json`). Windsurf has no project file,
nor has Cline, whose file lies in VS Code's global storage (the extension `saoudrizwan.claude-dev`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentify._common.dirs import user_dir
from agentify.connect import ConnectError


def _app_folder() -> Path:
    """The per-user application folder VS Code and Claude Desktop use on this platform."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"


@dataclass(frozen=True)
class Ide:
    name: str
    title: str
    key: str
    """The top-level key that maps server names to servers."""
    user: tuple[str, ...]
    """The user-level file, below the home directory (`~`) or the application folder (`@app`)."""
    project: tuple[str, ...] | None
    stdio_type: bool = False
    """Whether a stdio entry says `"type": "stdio"` (VS Code's own spelling)."""

    def file(self, project: Path | None) -> Path:
        """The IDE's MCP file; a symbolic link (dotfiles kept elsewhere) is followed, so the rewrite
        lands in the file it points to and the link stays."""
        if project is None:
            base = _app_folder() if self.user[0] == "@app" else Path.home()
            return base.joinpath(*self.user[1:]).resolve()
        if self.project is None:
            raise ConnectError(
                f"{self.title} has no project-level MCP file; run `agentify connect {self.name}` without --project"
            )
        return project.joinpath(*self.project).resolve()

    def config(self, project: Path | None) -> Path:
        """agentify's config for this IDE's servers, one per IDE (so one IDE's servers never land in another's
        gateway): `<agentify's config directory>/<ide>.json`, or `DIR/.agentify/<ide>.json` for a project (whose
        relative paths resolve against DIR, as for `.vscode/`)."""
        folder = user_dir("config") if project is None else project / ".agentify"
        return folder / f"{self.name}.json"

    def entry(self, command: list[str], config: Path, env: dict[str, str]) -> dict[str, Any]:
        """The one server the IDE keeps: agentify serving `config`."""
        entry: dict[str, Any] = {"type": "stdio"} if self.stdio_type else {}
        entry |= {"command": command[0], "args": [*command[1:], "serve", "--config", str(config)]}
        return entry | ({"env": env} if env else {})


IDES = {
    ide.name: ide
    for ide in (
        Ide("cursor", "Cursor", "mcpServers", ("~", ".cursor", "mcp.json"), (".cursor", "mcp.json")),
        Ide("vscode", "VS Code", "servers", ("@app", "Code", "User", "mcp.json"), (".vscode", "mcp.json"), True),
        Ide(
            "claude",
            "Claude",
            "mcpServers",
            ("@app", "Claude", "claude_desktop_config.json"),
            (".mcp.json",),  # Claude Code's project scope
        ),
        Ide("windsurf", "Windsurf", "mcpServers", ("~", ".codeium", "windsurf", "mcp_config.json"), None),
        Ide(
            "cline",
            "Cline",
            "mcpServers",
            ("@app", "Code", "User", "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json"),
            None,  # Cline keeps its servers in VS Code's global storage only
        ),
    )
}


def is_agentify(server: Any) -> bool:
    """Whether an IDE's server entry starts agentify itself (it is replaced, never moved behind agentify)."""
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        return False
    args = server.get("args")
    args = args if isinstance(args, list) else []
    name = Path(server["command"]).name.removesuffix(".exe")
    return name == "agentify" or args[:2] == ["-m", "agentify"]


def config_of(server: dict[str, Any]) -> str | None:
    """The `--config` an agentify entry passes, if any."""
    args = server.get("args") or []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--config" and isinstance(value, str):
            return value
    return None
