"""`agentify connect`: moves an IDE's MCP servers behind agentify and back.

ides.py     where each IDE keeps its MCP file and how its agentify entry is spelled (read with _common/jsonc.py:
            VS Code's may hold comments and trailing commas)
launch.py   the command the IDE's entry starts (under uvx: uvx again, never a path in uv's cache)
files.py    atomic writes with a mode, and the backups `--undo` restores
move.py     what a connection changes: the servers moved, renamed or kept, both files' new text
"""

from __future__ import annotations


class ConnectError(Exception):
    """The IDE's file, agentify's config or the backups cannot be used as they are; the message says
    which file and what to do. The command line exits 2 with it."""
