"""The arbigent runner: an MCP server over stdio that runs Arbigent scenarios through the real CLI."""
