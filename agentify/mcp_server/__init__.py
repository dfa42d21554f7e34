"""What the IDE sees: the gateway's MCP tools and handlers (`server`), the requests it sends the
client in either protocol era (`client_requests`), results (`results`), serving over stdio and
HTTP (`serving`) and the stdin guard (`stdio_guard`)."""
