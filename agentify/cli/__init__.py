"""The command line. `main` imports the commands only when one runs, so `--help` and `--version`
answer without loading the MCP SDK."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from agentify.cli.main import main as run

    return run(argv)
