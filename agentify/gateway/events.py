"""The in-process event bus: log records, trace updates and backend state changes.

Publishing never blocks and never fails: each subscriber has a bounded buffer, and a
subscriber whose buffer is full is dropped (the console reconnects and reloads). Recent
events of each kind are kept in bounded rings for the console's first page load.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

SUBSCRIBER_BUFFER = 1000


@dataclass(frozen=True)
class Event:
    kind: str  # "log" | "trace" | "backend"
    data: dict[str, Any]
    time: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "time": self.time, "data": self.data}


class EventBus:
    def __init__(self, keep: int = 2000) -> None:
        self.recent: dict[str, deque[Event]] = {
            "log": deque(maxlen=keep),
            "trace": deque(maxlen=keep),
            "backend": deque(maxlen=keep),
        }
        self._subscribers: list[MemoryObjectSendStream[Event]] = []

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        event = Event(kind, data)
        self.recent.setdefault(kind, deque(maxlen=2000)).append(event)
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                self._drop(send)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._drop(send)

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def subscribe(self, buffer: int = SUBSCRIBER_BUFFER) -> MemoryObjectReceiveStream[Event]:
        """A stream of every event published from now on; it ends if the reader falls behind."""
        send, receive = anyio.create_memory_object_stream[Event](buffer)
        self._subscribers.append(send)
        return receive

    def _drop(self, send: MemoryObjectSendStream[Event]) -> None:
        if send in self._subscribers:
            self._subscribers.remove(send)
        send.close()
