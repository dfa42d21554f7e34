"""Authorizations in progress for backends with `auth.perPrincipal`: the gateway's own `/oauth/start/<id>` and
`/oauth/callback`, guarded because the URL is the key.

A flow is made for one principal and one backend. Its id (random, 32 bytes) is the last segment of the URL
the person is sent to; the record says who it was made for, and, once the replica driving it got there, the
authorization server's URL and the `state` it sent. Each record expires `FLOW_SECONDS` after it was made.

- `/oauth/start/<id>` works once: it marks the flow used (atomically, in Redis across replicas), gives the
  browser a random cookie bound to the flow, and redirects to the authorization server.
- `/oauth/callback?state=...` completes only the flow whose `state` it carries, in the browser that started
  it (the cookie), and only once: a second use, a foreign `state` or another browser gets a page that says so.
  The code is handed to the replica that drives the flow (it holds the PKCE verifier), which exchanges it.
- A flow that asks for a person's own secrets (a stdio backend's `${person:NAME}`) has no authorization
  server: `/oauth/start/<id>` answers, once, a page with one password field per secret, posted back to the
  same URL from the browser that opened it (the cookie), once; the route seals the values into the person's
  vault record (`submitted`), and the flow ends. The flow's record never holds them.

With `server.redis` the records are Redis keys (any replica serves the routes, whichever started the flow),
else they live in this process. A flow holds no token, only the one-time code for the short while between
the callback and its exchange.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio

from agentify.team.redis_link import REDIS_SECONDS, redis_link

FLOW_SECONDS = 600.0
START_WAIT_SECONDS = 10.0  # how long /oauth/start waits for the driving replica to reach the authorization URL
POLL_SECONDS = 0.2
_PREFIX = "agentify:flow:"


T = TypeVar("T")


async def polled(fetch: Callable[[], Awaitable[T | None]]) -> T:
    """The first value `fetch` gives that is not None, asked every `POLL_SECONDS` (what replicas share in Redis
    has no event to wait on); the caller bounds the wait."""
    while True:
        value = await fetch()
        if value is not None:
            return value
        await anyio.sleep(POLL_SECONDS)


class FlowStoreUnavailable(Exception):
    """Redis cannot be reached; the message says where."""


class FlowKeys(Protocol):
    """A small key-value store with expiry: one process's memory, or Redis shared by the replicas."""

    async def get(self, key: str) -> dict[str, Any] | None: ...

    async def put(self, key: str, value: dict[str, Any], seconds: float) -> None: ...

    async def claim(self, key: str, seconds: float) -> bool:
        """True for the first caller only (until `seconds` pass)."""
        ...

    async def delete(self, key: str) -> None: ...

    async def aclose(self) -> None: ...


class MemoryKeys:
    def __init__(self) -> None:
        self._values: dict[str, tuple[float, Any]] = {}

    def _live(self, key: str) -> Any:
        now = time.monotonic()
        for stale in [k for k, (until, _) in self._values.items() if until <= now]:
            del self._values[stale]
        entry = self._values.get(key)
        return entry[1] if entry is not None else None

    async def get(self, key: str) -> dict[str, Any] | None:
        value = self._live(key)
        return dict(value) if isinstance(value, dict) else None

    async def put(self, key: str, value: dict[str, Any], seconds: float) -> None:
        self._values[key] = (time.monotonic() + seconds, dict(value))

    async def claim(self, key: str, seconds: float) -> bool:
        if self._live(key) is not None:
            return False
        self._values[key] = (time.monotonic() + seconds, True)
        return True

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def aclose(self) -> None:
        return None


class RedisKeys:
    def __init__(self, url: str) -> None:
        self._redis = redis_link(url)

    async def _do(self, command: Any) -> Any:
        try:
            with anyio.fail_after(REDIS_SECONDS):
                return await command
        except self._redis.unreachable as exc:
            raise FlowStoreUnavailable(
                f"the authorizations in progress in {self._redis.where} cannot be reached ({type(exc).__name__})"
            ) from None

    async def get(self, key: str) -> dict[str, Any] | None:
        raw = await self._do(self._redis.client.get(_PREFIX + key))
        try:
            value = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    async def put(self, key: str, value: dict[str, Any], seconds: float) -> None:
        await self._do(self._redis.client.set(_PREFIX + key, json.dumps(value), px=max(1, int(seconds * 1000))))

    async def claim(self, key: str, seconds: float) -> bool:
        milliseconds = max(1, int(seconds * 1000))
        return bool(await self._do(self._redis.client.set(_PREFIX + key, b"1", nx=True, px=milliseconds)))

    async def delete(self, key: str) -> None:
        await self._do(self._redis.client.delete(_PREFIX + key))

    async def aclose(self) -> None:
        await self._redis.aclose()


@dataclass(frozen=True)
class Page:
    """What a route answers the browser: a status, a short text, where to go next, and a cookie to set."""

    status: int
    text: str
    location: str | None = None
    cookie: str | None = None
    asks: tuple[str, ...] = ()
    """The names of the secrets the page's form asks for (a flow for a person's secrets)."""


@dataclass(frozen=True)
class Outcome:
    """How a flow ended: `error` is None when the tokens are in the vault."""

    error: str | None


class Flows:
    """The authorizations in progress of this gateway (of every replica, with Redis)."""

    def __init__(self, keys: FlowKeys) -> None:
        self._keys = keys

    async def pending(self, principal: str, backend: str) -> str | None:
        """The id of this principal's unexpired, unfinished flow for `backend`, so every round (and replica)
        sends the person to the same URL."""
        current = await self._keys.get(_who(principal, backend))
        flow_id = current.get("id") if current else None
        if not isinstance(flow_id, str):
            return None
        record = await self._keys.get(flow_id)
        return flow_id if record is not None and "outcome" not in record else None

    async def create(self, principal: str, backend: str, asks: tuple[str, ...] = ()) -> str:
        """A new flow; `asks`: the names of the person's own secrets its page asks for (no OAuth then)."""
        flow_id = secrets.token_urlsafe(32)
        record: dict[str, Any] = {"principal": principal, "backend": backend, "made": time.time()}
        if asks:
            record["asks"] = list(asks)
        await self._keys.put(flow_id, record, FLOW_SECONDS)
        await self._keys.put(_who(principal, backend), {"id": flow_id}, FLOW_SECONDS)
        return flow_id

    async def reached(self, flow_id: str, authorization_url: str, state: str) -> None:
        """The driving replica built the authorization URL (with its `state`): the start route may redirect."""
        record = await self._keys.get(flow_id)
        if record is None:
            return
        await self._keys.put(flow_id, record | {"url": authorization_url, "state": state}, self._left(record))
        await self._keys.put("state:" + state, {"id": flow_id}, self._left(record))

    async def start(self, flow_id: str) -> Page:
        """`GET /oauth/start/<id>`: once, to the authorization server, with a cookie that binds this browser."""
        if not await self._keys.claim("used:" + flow_id, FLOW_SECONDS):
            return Page(410, "This authorization link was used already. Ask for a new one by calling the tool again.")
        asked = await self._keys.get(flow_id)
        if asked is not None and asked.get("asks") and "outcome" not in asked:
            browser = secrets.token_urlsafe(24)
            await self._keys.put(flow_id, asked | {"browser": browser}, self._left(asked))
            text = (
                f"Backend {asked.get('backend')} runs as {asked.get('principal')}: give your own secrets for it. They "
                f"are kept encrypted, for {asked.get('principal')} only. If you are not {asked.get('principal')}, "
                "close this page: whoever sent you this link would act with your secrets."
            )
            return Page(200, text, cookie=browser, asks=tuple(str(name) for name in asked["asks"]))
        with anyio.move_on_after(START_WAIT_SECONDS):
            while (record := await self._keys.get(flow_id)) is not None and "url" not in record:
                if "outcome" in record:
                    break
                await anyio.sleep(POLL_SECONDS)
        if record is None:
            return Page(
                404, "This authorization link is unknown or expired (links last 10 minutes). Call the tool again"
            )
        if "url" not in record:
            return Page(503, "The gateway could not reach the backend's authorization server. Call the tool again.")
        browser = secrets.token_urlsafe(24)
        await self._keys.put(flow_id, record | {"browser": browser}, self._left(record))
        return Page(302, "Continue at the authorization server.", location=str(record["url"]), cookie=browser)

    async def callback(self, params: dict[str, str], browser: str | None) -> Page:
        """`GET /oauth/callback`: completes the one flow its `state` names, from the browser that started it."""
        state = params.get("state", "")
        index = await self._keys.get("state:" + state) if state else None
        flow_id = index.get("id") if index else None
        record = await self._keys.get(flow_id) if isinstance(flow_id, str) else None
        foreign = Page(400, "This authorization answer does not belong to an authorization agentify started here.")
        if record is None or not isinstance(flow_id, str):
            return foreign
        expected = record.get("browser")
        if not isinstance(expected, str) or browser is None or not secrets.compare_digest(expected, browser):
            return Page(403, "This authorization was started in another browser: open the link agentify gave you.")
        if not await self._keys.claim("answered:" + flow_id, FLOW_SECONDS):
            return Page(410, "This authorization was completed already.")
        answer: dict[str, Any] = {k: params[k] for k in ("code", "state", "iss", "error") if k in params}
        await self._keys.put("code:" + flow_id, answer, self._left(record))
        if "error" in params or not params.get("code"):
            return Page(400, "The authorization server refused the request; call the tool again to retry.")
        return Page(200, "agentify: authorized. You can close this window and go back to your IDE.")

    async def submitted(self, flow_id: str, browser: str | None, values: dict[str, str]) -> dict[str, Any] | Page:
        """`POST /oauth/start/<id>` of a flow for a person's secrets: its record (who, which backend, the names
        asked) when this browser opened the page, `values` holds every secret asked, and nobody answered it yet
        (now claimed); else the page that says why not."""
        record = await self._keys.get(flow_id)
        if record is None or not record.get("asks"):
            return Page(404, "This page is unknown or expired (pages last 10 minutes). Call the tool again.")
        if "outcome" in record:
            return Page(410, "This page was answered already.")
        expected = record.get("browser")
        if not isinstance(expected, str) or browser is None or not secrets.compare_digest(expected, browser):
            return Page(403, "This page was opened in another browser: open the link agentify gave you.")
        if not all(values.get(str(name)) for name in record["asks"]):
            return Page(400, "Every field is needed: go back and fill in each of them.")
        if not await self._keys.claim("answered:" + flow_id, FLOW_SECONDS):
            return Page(410, "This page was answered already.")
        return record

    async def code(self, flow_id: str) -> dict[str, str] | None:
        """The authorization server's answer, once the callback came (the driving replica polls this)."""
        return await self._keys.get("code:" + flow_id)

    async def finish(self, flow_id: str, error: str | None) -> None:
        record = await self._keys.get(flow_id)
        if record is not None:
            await self._keys.put(flow_id, record | {"outcome": error or ""}, self._left(record))
        await self._keys.delete("code:" + flow_id)

    async def outcome(self, flow_id: str) -> Outcome | None:
        """How the flow ended, or None while it is in progress (or unknown: expired)."""
        record = await self._keys.get(flow_id)
        if record is None:
            return Outcome("the authorization expired (links last 10 minutes): call the tool again")
        value = record.get("outcome")
        return None if value is None else Outcome(value or None)

    async def first_step(self, flow_id: str) -> Outcome | bool | None:
        """True once the driving replica reached the authorization URL; the outcome if the flow ended before
        (discovery or registration failed); None while neither."""
        record = await self._keys.get(flow_id)
        if record is None or "outcome" in record:
            return await self.outcome(flow_id)
        return True if "url" in record else None

    async def aclose(self) -> None:
        await self._keys.aclose()

    @staticmethod
    def _left(record: dict[str, Any]) -> float:
        made = record.get("made")
        return max(1.0, FLOW_SECONDS - (time.time() - made)) if isinstance(made, int | float) else FLOW_SECONDS


def _who(principal: str, backend: str) -> str:
    return "who:" + hashlib.sha256(f"{principal}\0{backend}".encode()).hexdigest()[:40]
