"""Pins in Redis (`server.redis`): every replica of a team gateway reads and writes the same ones, so
an approval made anywhere counts everywhere at once.

Keys: `agentify:pins:backends` (the set of backends that listed once), `agentify:pins:approved:<id>`
and `agentify:pins:pending:<id>` (hashes, tool name to a JSON record), `agentify:pins:people:<id>` (a set:
`BackendPins.people`), `agentify:pins:generation`
(raised by every write: what a replica compares), and the channel `agentify:pins:changed`, published
by every write, so a replica hears an approval at once (the generation is the fallback for a message
missed while the subscription reconnected, read every `POLL_SECONDS`: a replica idles on the channel).
A change is one MULTI/EXEC transaction; an approval watches the pending hash so two approvals never
accept one record twice.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

import anyio

from agentify.pinning.records import BackendPins, PinStoreError, Record, Snapshot, decode, encode
from agentify.security.credentials import mask_url

REDIS_SECONDS = 2.0
PREFIX = "agentify:pins:"
BACKENDS = PREFIX + "backends"
GENERATION = PREFIX + "generation"
CHANNEL = PREFIX + "changed"
POLL_SECONDS = 5.0
"""The generation is compared this often: every write is published, so this only bounds how late a replica
hears of one it missed while its subscription reconnected."""


def _approved(backend: str) -> str:
    return f"{PREFIX}approved:{backend}"


def _pending(backend: str) -> str:
    return f"{PREFIX}pending:{backend}"


def _people(backend: str) -> str:
    return f"{PREFIX}people:{backend}"


class RedisStore:
    def __init__(self, url: str) -> None:
        # imported here: the redis package costs every gateway without Redis 0.3 s of CPU at start
        from redis import Redis
        from redis.exceptions import RedisError

        self.where = mask_url(url)
        self.poll_seconds = POLL_SECONDS
        self._url = url
        self._client: Any = Redis.from_url(url, socket_connect_timeout=REDIS_SECONDS, socket_timeout=REDIS_SECONDS)
        self._errors = (RedisError, OSError, TimeoutError)
        self._listener: Any = None
        """The async client and its subscription, made by the first `wait_changed` (the gateway's only)."""

    def stamp(self) -> object:
        return self._run("read the pins' generation", lambda: self._client.get(GENERATION))

    def load(self) -> Snapshot:
        def read() -> Snapshot:
            names = sorted(n.decode() for n in self._client.smembers(BACKENDS))
            pipe = self._client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(_approved(name))
                pipe.hgetall(_pending(name))
                pipe.smembers(_people(name))
            hashes = pipe.execute()
            return {
                name: BackendPins(
                    self._records(hashes[3 * n], name),
                    self._records(hashes[3 * n + 1], name),
                    frozenset(person.decode() for person in hashes[3 * n + 2]),
                )
                for n, name in enumerate(names)
            }

        snapshot: Snapshot = self._run("read the pins", read)
        return snapshot

    def update(
        self,
        backend: str,
        *,
        first_use: Mapping[str, Record],
        pending: Mapping[str, Record],
        settled: Collection[str],
        people: Collection[str] = (),
    ) -> None:
        def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.sadd(BACKENDS, backend)
            for name, record in first_use.items():
                pipe.hsetnx(_approved(backend), name, encode(record))
            if settled:
                pipe.hdel(_pending(backend), *settled)
            if pending:
                pipe.hset(_pending(backend), mapping={k: encode(v) for k, v in pending.items()})
            if people:
                pipe.sadd(_people(backend), *people)
            pipe.incr(GENERATION)
            pipe.publish(CHANNEL, b"1")
            pipe.execute()

        self._run("record pins", write)

    def approve(self, backend: str, tools: Collection[str] | None) -> list[Record]:
        def accept(pipe: Any) -> list[Record]:
            waiting = self._records(pipe.hgetall(_pending(backend)), backend)
            chosen = {k: v for k, v in waiting.items() if tools is None or k in tools}
            pipe.multi()
            if chosen:
                at = time.time()
                pipe.hset(_approved(backend), mapping={k: encode(v.approved(at)) for k, v in chosen.items()})
                pipe.hdel(_pending(backend), *chosen)
                pipe.incr(GENERATION)
                pipe.publish(CHANNEL, b"1")
            return list(chosen.values())

        def run() -> list[Record]:
            done: list[Record] = self._client.transaction(accept, _pending(backend), value_from_callable=True)
            return done

        accepted: list[Record] = self._run("approve pins", run)
        return accepted

    async def wait_changed(self, seconds: float) -> None:
        """Returns when any process wrote the pins, or after `seconds`; Redis unreachable: after `seconds`."""
        with anyio.move_on_after(seconds):
            try:
                if self._listener is None:
                    from redis.asyncio import Redis

                    client = Redis.from_url(self._url, socket_connect_timeout=REDIS_SECONDS)
                    listener = client.pubsub(ignore_subscribe_messages=True)
                    self._listener = (client, listener)
                    await listener.subscribe(CHANNEL)
                listener = self._listener[1]
                while await listener.get_message(ignore_subscribe_messages=True, timeout=seconds) is None:
                    pass
            except self._errors:
                await self._drop_listener()
                await anyio.sleep(seconds)

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        await self._drop_listener()
        await anyio.to_thread.run_sync(self._client.close)

    async def _drop_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(REDIS_SECONDS):
                await listener[1].aclose()
                await listener[0].aclose()

    def _records(self, raw: Mapping[bytes, bytes], backend: str) -> dict[str, Record]:
        return {k.decode(): decode(v, f"{self.where}: {backend}.{k.decode()}") for k, v in raw.items()}

    def _run(self, what: str, action: Any) -> Any:
        try:
            return action()
        except self._errors as exc:
            raise PinStoreError(
                f"cannot {what} in {self.where} ({type(exc).__name__}); check that Redis is up and that "
                "server.redis is right"
            ) from None
