"""The change relay and a backend reached as each person: each principal's subscription is made on their own
session at the backend (with their first client, ended with their last), and what one person's session says
reaches only that person's clients; a shared backend's subscription is made once for everyone.

The relay is driven as the MCP server drives it (in the request's principal context), over `Offerings`-shaped
recorders and connections that record what they are told."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from agentify.backends.offers import Change
from agentify.mcp_server.offers import ChangeRelay
from agentify.team.principal import acting_for

pytestmark = pytest.mark.anyio

PERSONAL, SHARED = "note://mine", "doc://ours"


@dataclass
class Recorder:
    """What the relay asks of `Offerings`: whose subscriptions reached the backend."""

    made: list[tuple[str, str, bool]] = field(default_factory=list)

    async def personal(self, uri: str) -> bool:
        return uri == PERSONAL

    async def subscribe(self, uri: str, *, subscribe: bool = True) -> bool:
        from agentify.team.principal import current_principal

        self.made.append((current_principal() or "", uri, subscribe))
        return True


@dataclass(eq=False)
class Outbound:
    told: list[tuple[str, Any]] = field(default_factory=list)
    two: anyio.Event = field(default_factory=anyio.Event)
    """Set once two notifications came (what each client is told here before its unsubscribing)."""

    async def notify(self, method: str, params: Any) -> None:
        self.told.append((method, params))
        if len(self.told) >= 2:
            self.two.set()


@dataclass(eq=False)
class Connection:
    """A 2025-11-25 client's connection, as much as the relay uses of it."""

    protocol_version: str = "2025-11-25"
    outbound: Outbound = field(default_factory=Outbound)
    exit_stack: Any = None

    def __post_init__(self) -> None:
        from contextlib import ExitStack

        self.exit_stack = ExitStack()


async def test_each_persons_subscription_is_their_own_and_what_their_session_says_is_theirs() -> None:
    recorder = Recorder()
    relay = ChangeRelay(recorder)  # type: ignore[arg-type]
    clients = {"alice": [Connection(), Connection()], "bob": [Connection()]}
    async with anyio.create_task_group() as tg:
        await tg.start(relay.run)
        for name, connections in clients.items():
            with acting_for(name):
                for connection in connections:
                    relay.remember(connection)  # type: ignore[arg-type]
                    for uri in (PERSONAL, SHARED):
                        await relay.subscribe(connection, uri, subscribe=True)  # type: ignore[arg-type]
        relay.changed(Change("gh", "resource", PERSONAL, principal="alice"))
        relay.changed(Change("gh", "resources", principal="bob"))
        relay.changed(Change("docs", "resource", SHARED))
        with anyio.fail_after(5):
            for connections in clients.values():
                for connection in connections:
                    await connection.outbound.two.wait()
        with acting_for("alice"):
            await relay.subscribe(clients["alice"][0], PERSONAL, subscribe=False)  # type: ignore[arg-type]
            await relay.subscribe(clients["alice"][1], PERSONAL, subscribe=False)  # type: ignore[arg-type]
        relay.close()
    # At the per-person backend: alice's first client and bob's each subscribed, alice's last unsubscribed; at the
    # shared one: once, whoever came first.
    assert recorder.made == [
        ("alice", PERSONAL, True),
        ("alice", SHARED, True),
        ("bob", PERSONAL, True),
        ("alice", PERSONAL, False),
    ]
    updated = ("notifications/resources/updated", {"uri": PERSONAL})
    shared = ("notifications/resources/updated", {"uri": SHARED})
    listed = ("notifications/resources/list_changed", None)
    for connection in clients["alice"]:
        assert connection.outbound.told == [updated, shared], connection.outbound.told
    assert clients["bob"][0].outbound.told == [listed, shared], clients["bob"][0].outbound.told
