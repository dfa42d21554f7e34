"""Errors of the arbigent runner, each carrying a message a person can act on.

    ArbigentError
     ├── StartupError       a check before serving failed: printed on stderr, exit code 1
     │    └── ProjectError  the project file is missing, unreadable, not YAML or not an Arbigent project
     └── ToolCallError      a tool call cannot start a run (unknown tool, bad arguments, spawn failure):
                            the server turns it into an `isError` result, never a JSON-RPC error

    ConfigError             the --config file is missing or unreadable, or sets what the runner decides:
                            printed on stderr, exit code 1 (the gateway's own `ConfigError`, from
                            `agentify._common.errors`, where the runner's start-up handler catches it too)

`ProjectError` is also raised when the watched project file changes into something unusable; the
server then keeps the last good tools and logs the message.
"""

from __future__ import annotations

from agentify._common.errors import ConfigError

__all__ = ["ArbigentError", "ConfigError", "ProjectError", "StartupError", "ToolCallError"]


class ArbigentError(Exception):
    """Base of every error the runner raises on purpose."""


class StartupError(ArbigentError):
    """The runner cannot start serving."""


class ProjectError(StartupError):
    """The project file cannot be used."""


class ToolCallError(ArbigentError):
    """A tool call cannot be carried out; the message goes to the model as an `isError` result."""
