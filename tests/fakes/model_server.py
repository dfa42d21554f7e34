"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

It is a real HTTP server, so the gateway's real openai client, retries and error
handling are exercised. Each request is answered by the next scripted reply, or by
`router(body)` when the script is empty. Every request body is recorded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any] | str, content: str | None = None) -> Reply:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        message = {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": "call_" + uuid.uuid4().hex[:8],
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
            ],
        }
        return cls(body=_completion(message, "tool_calls"))

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(body=_completion({"role": "assistant", "content": content}, "stop"))

    @classmethod
    def error(cls, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, body={"error": {"message": message, "type": "test"}}, headers=headers or {})


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:10],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132},
    }


class ModelServer:
    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.router: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def user_messages(self) -> list[str]:
        return [m["content"] for body in self.requests for m in body["messages"] if m["role"] == "user"]

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self.script:
                return self.script.pop(0)
        if self.router is not None:
            return self.router(body)
        return Reply.error(500, "the test scripted no reply for this request")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.endswith("/chat/completions"):
                    reply = Reply.error(404, f"unknown path {self.path}")
                else:
                    reply = server._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                data = json.dumps(reply.body or {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
