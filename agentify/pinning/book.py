"""The gateway's pins (config `pinning`): which of a backend's tools are trusted, and why any other is held.

A backend's first listing is trusted on first use: each tool's definition is recorded, except one
whose description speaks to the model as an instruction or names another backend's tool
(`patterns`). From then on a tool whose definition differs from the recorded one, and a tool the
backend adds, is held until a person approves it (`agentify pins approve`), and so is a suspect
description, also one trusted on first use and found to name a backend that came later. Only an
approval by a person silences the patterns. Under `enforce` a held tool is withheld (listed nowhere,
its call refused as `tool_changed`); under `warn` it is listed, flagged and logged once; the recorded
definition stays until approved either way.

`judge` and `observe` work on memory and never wait: writes are queued and `run` (a background task)
stores them and re-reads the store whenever another process changed it, so an approval reaches a
running gateway at once (Redis publishes it) or within the store's `poll_seconds` (a file: 0.5 s).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from loguru import logger

from agentify.errors import ToolChanged
from agentify.pinning.digest import changed_parts, definition, difference, digest
from agentify.pinning.patterns import distinctive, suspect
from agentify.pinning.records import BackendPins, PinStoreError, Record
from agentify.pinning.store import PinStore
from agentify.team.audit import trust_changed

Mode = Literal["off", "warn", "enforce"]
POLL_SECONDS = 0.5
CLOSE_SECONDS = 2.0

_PERSON: ContextVar[str | None] = ContextVar("agentify_pins_person", default=None)
"""Whose session of a backend run as each person lists now (`PinBook.listing_as`)."""


@dataclass(frozen=True)
class Held:
    """A tool that waits for approval: `tool` is the backend's own name for it."""

    backend: str
    tool: str
    reason: str


@dataclass
class _Write:
    first_use: dict[str, Record] = field(default_factory=dict)
    pending: dict[str, Record] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)
    people: set[str] = field(default_factory=set)

    def merge(self, other: _Write) -> None:
        self.people |= other.people
        for name, record in other.first_use.items():
            self.first_use.setdefault(name, record)
        self.pending = {k: v for k, v in self.pending.items() if k not in other.settled} | other.pending
        self.settled = (self.settled - set(other.pending)) | other.settled


class PinBook:
    def __init__(self, mode: Mode, store: PinStore, on_change: Callable[[], None] | None = None) -> None:
        """`on_change` is called (synchronously) whenever what `judge` says may have changed."""
        self.mode: Mode = mode
        self.store = store
        self.on_change = on_change
        self.generation = 0
        """Raised with every change of the pins or of the backends' names: a cache key for judgments."""
        self._snapshot: dict[str, BackendPins] = {}
        self._stamp: object = None
        self._failure: str | None = None
        """Why the pins could never be read: every tool is held until they can."""
        self._loaded = False
        self._unreachable: str | None = None
        self._listed: dict[str, list[types.Tool]] = {}
        self._queued: dict[str, _Write] = {}
        self._logged: set[tuple[str, str, str]] = set()
        self._wake = anyio.Event()
        self._per_person: Counter[str] = Counter()
        self._listers: dict[str, str | None] = {}
        """Whose session listed last what `_listed` keeps of a backend run as each person."""

    def each_person(self, backend: str) -> None:
        """`backend` runs as each person (`people.py`): what one person's session lists another's may not (their
        scopes differ), so a tool in a person's first listing of it is a first use (one another person's first
        listing recorded is known), and one added in their later listings waits for approval; who listed first is
        kept in the store (`BackendPins.people`, as a digest), so it holds on every replica and across restarts.
        What waits of it waits for a person's approval only: one person's listing of the approved definition never
        settles a change another person's session listed."""
        self._per_person[backend] += 1

    def shared_again(self, backend: str) -> None:
        """A front of `backend` run as each person stopped (`each_person` counted it): with none left (a reloaded
        config made it one shared backend) its tools are judged as any backend's again."""
        self._per_person[backend] -= 1
        if self._per_person[backend] <= 0:
            del self._per_person[backend]
            self._changed()

    @contextmanager
    def listing_as(self, person: str) -> Iterator[None]:
        """What a backend run as each person lists within the block is `person`'s listing (their supervisor's)."""
        token = _PERSON.set(person)
        try:
            yield
        finally:
            _PERSON.reset(token)

    def open(self) -> None:
        """Reads the store once, before any backend lists (blocking: called at start-up)."""
        if self.mode == "off":
            return
        try:
            self._stamp = self.store.stamp()
            self._snapshot = dict(self.store.load())
            self._loaded = True
        except PinStoreError as exc:
            self._fail(str(exc))

    def set_mode(self, mode: Mode) -> None:
        """A reloaded config's `pinning`; switched on, the store is read (blocking) and this run's listings judged."""
        if mode == self.mode:
            return
        was, self.mode = self.mode, mode
        if was == "off":
            self.open()
            for backend, listed in list(self._listed.items()):
                self._record(backend, listed)
        logger.info("pinning is now {}", mode)
        self._changed()

    def judge(self, backend: str, tools: list[types.Tool], first: bool = False) -> dict[str, Held]:
        """The tools of `tools` (as `backend` lists them) that wait for approval, by name. `first`: the listing is a
        person's first of a backend run as each person (what it has that is not pinned is a first use)."""
        if self.mode == "off":
            return {}
        if self._failure is not None:
            reason = f"the pins cannot be read ({self._failure})"
            return {t.name: Held(backend, t.name, reason) for t in tools}
        pins = self._snapshot.get(backend)
        others = self._other_names(backend, {t.name for t in tools})
        held: dict[str, Held] = {}
        for tool in tools:
            reason = self._reason(tool, pins, others, backend in self._per_person, first)
            if reason:
                held[tool.name] = Held(backend, tool.name, reason)
        return held

    def observe(self, backend: str, tools: list[types.Tool]) -> None:
        """What a session of `backend` listed: recorded on first use, held tools queued as pending, and
        logged once. Other backends' tools are judged again when this one brings new names."""
        before = self._names(backend)
        self._listed[backend] = list(tools)
        self._listers[backend] = _PERSON.get()
        if self.mode == "off":
            return
        self._record(backend, tools)
        if self._names(backend) != before:
            for other, listed in list(self._listed.items()):
                if other != backend:
                    self._record(other, listed)
        self._changed()

    def observe_extra(self, backend: str, tools: list[types.Tool]) -> None:
        """What an extra session of `backend` listed (another process of it, `pool.py`): judged by the pins, and what
        is held queued as pending and logged once. It never stands for the backend's listing (the owner session's
        does: the console, the shadowing check and a re-read of the store judge that one). Before the backend has
        pins nothing is queued (its calls are judged all the same): its first use is the owner session's listing. It
        never settles a waiting change: another process listing the approved definition says nothing of the owner's."""
        if self.mode != "off" and backend in self._snapshot and self._record(backend, tools, settle=False):
            self._changed()

    async def run(self) -> None:
        """Stores what `observe` queued and follows other processes' changes; runs until cancelled."""
        while True:
            if self.mode != "off":
                await self._flush()
                await self._poll()
            await self._pause()
            self._wake = anyio.Event()

    async def _pause(self) -> None:
        """Until a write is queued here, or the store says another process wrote, at most its `poll_seconds`."""
        async with anyio.create_task_group() as tg:

            async def first(waiting: Callable[[], Awaitable[None]]) -> None:
                await waiting()
                tg.cancel_scope.cancel()

            tg.start_soon(first, self._wake.wait)
            if self.mode != "off":
                tg.start_soon(first, lambda: self.store.wait_changed(self.store.poll_seconds))
            else:
                tg.start_soon(first, lambda: anyio.sleep(POLL_SECONDS))

    async def sync(self) -> None:
        """One round of `run` (tests, and a gateway that wants the store current now)."""
        await self._flush()
        await self._poll()

    async def close(self) -> None:
        """Stores what is still queued (bounded: a gateway that stops soon after a listing keeps its pins)."""
        if self.mode != "off":
            with anyio.move_on_after(CLOSE_SECONDS):
                await self._flush()
        await self.store.aclose()

    def changed_tools(self) -> list[dict[str, Any]]:
        """Each tool of this run's listings that waits for approval (what the console shows): `backend`, `tool`,
        `reason`, `difference` (a unified diff of the pinned and the current definition) and `withheld`."""
        out: list[dict[str, Any]] = []
        for backend, listed in sorted(self._listed.items()):
            held = self.judge(backend, listed)
            pins = self._snapshot.get(backend)
            for tool in listed:
                if tool.name not in held:
                    continue
                pinned = pins.approved.get(tool.name) if pins is not None else None
                old = dict(pinned.definition) if pinned is not None else None
                out.append(
                    {
                        "backend": backend,
                        "tool": tool.name,
                        "reason": held[tool.name].reason,
                        "difference": difference(old, definition(tool), tool.name),
                        "withheld": self.mode == "enforce",
                    }
                )
        return out

    async def approve(self, backend: str, tool: str | None = None) -> int:
        """Accepts what waits of `backend` (or of its one `tool`), as `agentify pins approve` does; returns how
        many definitions were accepted.

        Raises:
            KeyError: nothing of it waits for approval.
            PinStoreError: the store cannot be written.
        """
        await self._flush()  # what this gateway saw waits in the store too
        accepted = await anyio.to_thread.run_sync(self.store.approve, backend, [tool] if tool else None)
        if not accepted:
            raise KeyError(backend if tool is None else f"{backend}.{tool}")
        await self._poll()
        return len(accepted)

    # ----- judging ---------------------------------------------------------------------------

    def _reason(
        self, tool: types.Tool, pins: BackendPins | None, others: Mapping[str, str], per_person: bool, first: bool
    ) -> str:
        defined = definition(tool)
        now = digest(defined)
        waiting = pins.pending.get(tool.name) if pins is not None else None
        if per_person and waiting is not None and waiting.reason:
            return waiting.reason  # one person's listing of the approved definition says nothing of another's
        approved = pins.approved.get(tool.name) if pins is not None else None
        if approved is not None and approved.digest == now:
            return "" if approved.how == "approved" else suspect(defined, others)
        if approved is not None:
            parts = ", ".join(changed_parts(dict(approved.definition), defined)) or "its definition"
            return _joined(f"changed since it was pinned ({parts})", suspect(defined, others))
        if waiting is not None and waiting.digest == now and waiting.reason:
            return waiting.reason
        if pins is not None and not (per_person and first):
            added = f"added after {'this person' if per_person else 'the backend'}'s first listing"
            return _joined(added, suspect(defined, others))
        return suspect(defined, others)

    def _other_names(self, backend: str, own: set[str]) -> dict[str, str]:
        """The names of other backends' tools a description could mention, each with the gateway's name for it."""
        names: dict[str, str] = {}
        for other in set(self._listed) | set(self._snapshot):
            if other == backend:
                continue
            for name in self._names(other):
                names[f"{other}__{name}"] = f"{other}__{name}"
                if distinctive(name) and name not in own:
                    names.setdefault(name, f"{other}__{name}")
        return names

    def _names(self, backend: str) -> set[str]:
        listed = {t.name for t in self._listed.get(backend, [])}
        pins = self._snapshot.get(backend)
        return listed | (set(pins.approved) if pins is not None else set())

    # ----- recording -------------------------------------------------------------------------

    def _record(self, backend: str, tools: list[types.Tool], settle: bool = True) -> bool:
        """Queues what `tools` change of the pins; True when they change any. `settle`: a waiting record of a tool
        `tools` no longer holds is dropped (an extra session's listing never does, nor is it a person's first)."""
        pins = self._snapshot.get(backend)
        per_person = backend in self._per_person
        person = _person_key(self._listers.get(backend)) if per_person else ""
        first = per_person and settle and (pins is None or person not in pins.people)
        held = self.judge(backend, tools, first)
        if self._failure is not None:
            return False
        write = _Write()
        if first:
            write.people.add(person)
        at = time.time()
        for tool in tools:
            defined = definition(tool)
            now = digest(defined)
            if tool.name in held:
                reason = held[tool.name].reason
                waiting = pins.pending.get(tool.name) if pins is not None else None
                kept = per_person and waiting is not None and waiting.reason  # what waits is what a person approves
                if not kept and (waiting is None or waiting.digest != now or waiting.reason != reason):
                    write.pending[tool.name] = Record(digest=now, definition=defined, at=at, reason=reason)
                self._log_held(held[tool.name])
                continue
            if pins is None or tool.name not in pins.approved:
                write.first_use[tool.name] = Record(digest=now, definition=defined, at=at)
            if settle and pins is not None and tool.name in pins.pending:
                write.settled.add(tool.name)
        if pins is None or write.first_use or write.pending or write.settled or write.people:
            self._snapshot[backend] = _applied(pins, write)
            self._queued.setdefault(backend, _Write()).merge(write)
            self._wake.set()
            return True
        return False

    def _log_held(self, held: Held) -> None:
        key = (held.backend, held.tool, held.reason)
        if key in self._logged:
            return
        self._logged.add(key)
        what = "withheld" if self.mode == "enforce" else "flagged (pinning is warn: still listed)"
        logger.bind(backend=held.backend).warning(
            "tool {!r} is {}: {}. Read the difference and accept it with: agentify pins approve {} {}",
            held.tool,
            what,
            held.reason,
            held.backend,
            held.tool,
        )

    # ----- the store -------------------------------------------------------------------------

    async def _flush(self) -> None:
        queued, self._queued = self._queued, {}
        for backend, write in queued.items():
            try:
                await anyio.to_thread.run_sync(self._store_write, backend, write)
            except PinStoreError as exc:
                if str(exc) != self._unreachable:
                    logger.error("pins not stored (kept, and stored once the store answers): {}", exc)
                    self._unreachable = str(exc)
                newer, self._queued = self._queued, queued  # kept, with what came meanwhile on top
                for rest, again in newer.items():
                    self._queued.setdefault(rest, _Write()).merge(again)
                return

    def _store_write(self, backend: str, write: _Write) -> None:
        self.store.update(
            backend, first_use=write.first_use, pending=write.pending, settled=write.settled, people=write.people
        )

    async def _poll(self) -> None:
        try:
            stamp = await anyio.to_thread.run_sync(self.store.stamp)
            if stamp == self._stamp and self._failure is None:
                return
            loaded = dict(await anyio.to_thread.run_sync(self.store.load))
        except PinStoreError as exc:
            self._fail(str(exc))
            return
        self._stamp = stamp
        self._loaded, self._unreachable = True, None
        for backend, write in self._queued.items():  # not stored yet: still true in memory
            loaded[backend] = _applied(loaded.get(backend), write)
        if loaded != self._snapshot or self._failure is not None:
            if self._failure is not None:
                logger.info("the pins can be read again ({})", self.store.where)
            self._failure = None
            _audit_approvals(self._snapshot, loaded)
            self._snapshot = loaded
            for backend, listed in list(self._listed.items()):
                self._record(backend, listed)
            self._changed()

    def _fail(self, message: str) -> None:
        """Pins never read hold every tool; pins read once are kept (and judged by) while the store is away."""
        if self._loaded:
            if message != self._unreachable:
                logger.warning("{}; judging by the pins read last until the store answers again", message)
            self._unreachable = message
            return
        if message != self._failure:
            logger.error(
                "{}; until they can be read every backend tool is {}",
                message,
                "withheld (pinning: enforce)" if self.mode == "enforce" else "flagged",
            )
        if self._failure is None:
            self._failure = message
            self._changed()

    def _changed(self) -> None:
        self.generation += 1
        if self.on_change is not None:
            self.on_change()


def _applied(pins: BackendPins | None, write: _Write) -> BackendPins:
    pins = pins or BackendPins()
    approved = dict(pins.approved)
    for name, record in write.first_use.items():
        approved.setdefault(name, record)
    pending = {k: v for k, v in pins.pending.items() if k not in write.settled} | write.pending
    return BackendPins(approved, pending, pins.people | write.people)


def _person_key(person: str | None) -> str:
    """What the store keeps of a person (`BackendPins.people`): a digest, not their name."""
    return hashlib.sha256((person or "").encode()).hexdigest()[:32]


def _joined(*reasons: str) -> str:
    return "; ".join(r for r in reasons if r)


def refusal(held: Held, name: str) -> ToolChanged:
    """The error of a call to a withheld tool, which the client knows as `name`."""
    return ToolChanged(
        f"{name} is withheld (pinning: enforce): {held.reason}. Nothing was run. A person who may change the "
        f"gateway's trust reads the difference and accepts it with `agentify pins approve {held.backend} "
        f"{held.tool}`; the gateway picks the approval up without a restart."
    )


def _audit_approvals(before: Mapping[str, BackendPins], after: Mapping[str, BackendPins]) -> None:
    """Each definition a person approved since `before` (here, in the console, or with `agentify pins approve`
    in another process) is a change of trust in the audit (`server.audit`), with its digest."""
    for backend, pins in after.items():
        known = before.get(backend)
        for tool, record in pins.approved.items():
            if record.how == "approved" and (known is None or known.approved.get(tool) != record):
                trust_changed("pins_approved", f"{backend}__{tool}", {"digest": record.digest})
