"""What a pin store holds: per backend, the approved definition of each tool and the ones waiting
for approval, as frozen records, and how they are written as JSON (the file and Redis share it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

How = Literal["first-use", "approved"]


class PinStoreError(Exception):
    """The pins cannot be read or written: the message says where and what to do."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """One definition of one tool: approved (`how`), or waiting (`reason` says why it is held)."""

    digest: str
    definition: Mapping[str, Any]
    at: float
    """When it was recorded (epoch seconds)."""
    how: How = "first-use"
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"digest": self.digest, "definition": dict(self.definition), "at": self.at}
        out |= {"how": self.how} if not self.reason else {"reason": self.reason}
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> Record:
        """Raises PinStoreError: `data` is not a record."""
        try:
            how = data.get("how", "first-use")
            if how not in ("first-use", "approved"):
                raise ValueError(f"how is {how!r}")
            return cls(
                digest=str(data["digest"]),
                definition=dict(data["definition"]),
                at=float(data["at"]),
                how=how,
                reason=str(data.get("reason", "")),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise PinStoreError(f"{where} is not a pin record ({type(exc).__name__}: {exc})") from None

    def approved(self, at: float) -> Record:
        """This definition, accepted by a person."""
        return Record(digest=self.digest, definition=self.definition, at=at, how="approved")


@dataclass(frozen=True)
class BackendPins:
    """One backend's pins. A backend present here has listed its tools once: from then on a tool it
    adds waits for approval."""

    approved: Mapping[str, Record] = field(default_factory=dict)
    pending: Mapping[str, Record] = field(default_factory=dict)
    people: frozenset[str] = frozenset()
    """For a backend run as each person: a digest of each person whose first listing of it was recorded (from then
    on a tool it adds in their sessions waits for approval)."""


Snapshot = Mapping[str, BackendPins]


def encode(record: Record) -> bytes:
    return json.dumps(record.as_json(), sort_keys=True).encode()


def decode(raw: bytes | str, where: str) -> Record:
    """Raises PinStoreError."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PinStoreError(f"{where} is not JSON ({exc})") from None
    return Record.from_json(data, where)
