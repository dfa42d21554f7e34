"""The debug console: live logs, traces and backend state in the browser.

A FastAPI app served by uvicorn inside the gateway's own event loop, off unless a debug port
is set. Modules: `supervisor` (starts and stops it with the gateway; imports nothing heavy, so
FastAPI is only loaded when the console is on), `serve` (uvicorn embedding, port and host
checks, the start-up line with the token), `connections` (idle and slow connections time out
and cannot crowd out requests), `security` (token, Host and Origin checks as ASGI middleware),
`api` (JSON API, OpenAPI docs and the page from debug_ui/), `actions` (the routes that act: tasks,
tool calls, confirmations, restarts, pin approvals), `confirmations` (the confirmations of those
calls, asked in the page), `governance` (the optional pins and audit a gateway may carry),
`stream` (the one WebSocket), `views` (the redacted, bounded data every route serves).
"""

from agentify.console.supervisor import ConsoleSupervisor, attached_console, console_token

__all__ = ["ConsoleSupervisor", "attached_console", "console_token"]
