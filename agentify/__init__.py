"""agentify: one MCP server for the IDE that routes a task to the right backend tool."""

__version__ = "0.1.0"
