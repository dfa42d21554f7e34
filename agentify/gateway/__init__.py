"""The transport-agnostic core: the long-lived services (`services`), the task runner (`tasks`),
the safety policy (`policy`, `confirm_prompt`), tool inputs (`inputs`), result caps
(`result_caps`), events and traces. Never imports the MCP server side, FastAPI or the console."""
