"""loguru set-up: one stderr sink (never stdout: it is the MCP wire) that redacts secrets.

Other modules only `from loguru import logger` and `bind()` context (backend, trace).
`configure` is called once by the composition root; `set_level` changes the level later
(for instance when the `initialize` request carries `logLevel`).

The libraries log through the standard `logging` module (the MCP SDK, httpx, uvicorn when it is
given no logging config of its own): `configure` routes every such record from INFO up into the
same sink, so a secret that an SDK error message quotes is masked like any other line. An
exception a library logs is one line at its level; its traceback is a DEBUG line.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TextIO

from loguru import logger

LINE_LIMIT = 20_000
"""Characters of one log line (tracebacks included) kept after masking; the rest is cut with a note."""
TEXT_FORMAT = "{time:HH:mm:ss.SSS} | {level: <7} | {name} | {message}{extra[extra_text]}"


class Masker(Protocol):
    """What the sink masks with (`agentify.security.redact.Redactor`): secrets out, then cut."""

    def bounded(self, value: str, limit: int) -> str: ...

    def data(self, value: Any, *, patterns: bool = True, limit: int | None = None) -> Any: ...


class LogSetup:
    """Owns the stderr sink; records also go to `listeners` (the console), redacted."""

    def __init__(
        self, masker: Masker, stream: TextIO | None = None, json_lines: bool = False, text_format: str = TEXT_FORMAT
    ) -> None:
        self._masker = masker
        self._stream = stream or sys.stderr
        self._json = json_lines
        self._format = text_format
        self._sink_id: int | None = None
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def configure(self, level: str) -> None:
        logger.remove()
        logger.configure(patcher=_extra_text)
        logging.basicConfig(handlers=[_ToLoguru()], force=True)
        self.set_level(level)

    def set_level(self, level: str) -> None:
        if self._sink_id is not None:
            logger.remove(self._sink_id)
        # No variable values in tracebacks (`diagnose`): they may hold secrets the masker does not know.
        self._sink_id = logger.add(
            self._write, level=level.upper(), format=self._format, colorize=False, backtrace=False, diagnose=False
        )
        # The libraries' debug records (every message in full) are never made: they are hot and huge.
        logging.getLogger().setLevel(max(logger.level(level.upper()).no, logging.INFO))

    def reveal(self, name: str, text: str) -> None:
        """Writes one INFO line to stderr around the redacting sink: for the one line that must show a
        secret to the user who started agentify (a generated token). Nothing else sees it."""
        stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
        try:
            self._stream.write(f"{stamp} | INFO    | {name} | {text}\n")
            self._stream.flush()
        except (OSError, ValueError):
            pass  # stderr closed by the parent: nobody to tell

    def _write(self, message: Any) -> None:
        record = message.record
        if self._json:
            line = json.dumps(self.as_event(record), ensure_ascii=False) + "\n"
        else:
            line = self._masker.bounded(str(message), LINE_LIMIT)
            if not line.endswith("\n"):
                line += "\n"
        try:
            self._stream.write(line)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # stderr closed by the parent: there is nobody left to tell
        if self.listeners:
            event = self.as_event(record)
            for listener in list(self.listeners):
                listener(event)

    def as_event(self, record: Any) -> dict[str, Any]:
        """A log record as redacted JSON-ready data (for the console and JSON lines)."""
        extra = {k: v for k, v in record["extra"].items() if k != "extra_text"}
        text = record["message"]
        if record["exception"] is not None:
            text += "\n" + "".join(_format_exception(record["exception"]))
        return {
            "time": record["time"].timestamp(),
            "level": record["level"].name,
            "logger": record["name"],
            "message": self._masker.bounded(text, LINE_LIMIT),
            "extra": self._masker.data({k: str(v) for k, v in extra.items()}),
        }


class _ToLoguru(logging.Handler):
    """Hands the standard library's records to loguru, keeping the library's logger name."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        text = record.getMessage()
        failure = record.exc_info[1] if record.exc_info else None
        if failure is not None:
            text += f" ({type(failure).__name__}: {failure})"
        named = logger.patch(lambda r: r.update(name=record.name))  # type: ignore[call-arg]
        named.log(level, "{}", text)
        if failure is not None:
            named.opt(exception=record.exc_info).debug("the traceback of the above")


class _Prefixed(logging.Handler):
    def __init__(self, prefix: str, skip: frozenset[str]) -> None:
        super().__init__(logging.WARNING)
        self._prefix = prefix
        self._skip = skip

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg in self._skip:
            return
        level = record.levelname if record.levelname in ("WARNING", "ERROR", "CRITICAL") else "WARNING"
        logger.opt(exception=record.exc_info).log(level, "{}: {}", self._prefix, record.getMessage())


def route_stdlib(name: str, prefix: str, skip: frozenset[str] = frozenset()) -> None:
    """Warnings and errors of a library that logs with `logging` go through the redacting sink (and
    the console), prefixed; `skip` holds messages that are not problems. Idempotent."""
    log = logging.getLogger(name)
    if not any(isinstance(handler, _Prefixed) for handler in log.handlers):
        log.addHandler(_Prefixed(prefix, skip))
        log.setLevel(logging.WARNING)
        log.propagate = False


def _extra_text(record: Any) -> None:
    extra = {k: v for k, v in record["extra"].items() if k != "extra_text"}
    record["extra"]["extra_text"] = "".join(f" | {k}={v}" for k, v in extra.items())


def _format_exception(exception: Any) -> list[str]:
    return traceback.format_exception(exception.type, exception.value, exception.traceback)
