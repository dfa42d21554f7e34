"""What a backend offers beside its tools: its capabilities and its resources, templates and prompts,
and what it says when they change (`Change`).

Learnt when a session starts (and again after a `*/list_changed`) and kept in the backend's manifest,
so a lazy or idle backend answers these lists without being started, as it does for its tools. A
live backend is asked directly (paginated); this snapshot is only what is known without one. Each
list kept is bounded (`MAX_KEPT`): a backend with more is asked live once it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import mcp_types as types
from loguru import logger
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from agentify.backends.routes import ResourceRoutes
from agentify.config import BackendConfig

if TYPE_CHECKING:
    from agentify.backends.manifest import ManifestStore

MAX_KEPT = 500
MAX_SUBSCRIBED = 1000
"""Subscriptions kept per backend to renew after a restart; past it, a new one is still made but not renewed."""

_Page = TypeVar("_Page", types.ListResourcesResult, types.ListResourceTemplatesResult, types.ListPromptsResult)


@dataclass(frozen=True)
class Offers:
    capabilities: types.ServerCapabilities | None = None
    """None: never learnt (no session yet, no manifest)."""
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    complete: bool = True
    """False when a list was longer than what is kept, or could not be listed: ask the live backend."""

    @property
    def known(self) -> bool:
        return self.capabilities is not None

    def has(self, what: str) -> bool:
        """Whether the backend offers `resources`, `prompts`, `completions` or `subscribe`."""
        caps = self.capabilities
        if caps is None:
            return False
        if what == "subscribe":
            return bool(caps.resources and caps.resources.subscribe)
        return getattr(caps, what) is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "capabilities": _dump(self.capabilities) if self.capabilities else None,
            "resources": [_dump(r) for r in self.resources],
            "resourceTemplates": [_dump(t) for t in self.templates],
            "prompts": [_dump(p) for p in self.prompts],
            "complete": self.complete,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Offers:
        """Raises ValidationError, KeyError or TypeError for a file that is not what `to_json` wrote."""
        caps = data["capabilities"]
        return cls(
            capabilities=types.ServerCapabilities.model_validate(caps) if caps is not None else None,
            resources=tuple(types.Resource.model_validate(r) for r in data["resources"]),
            templates=tuple(types.ResourceTemplate.model_validate(t) for t in data["resourceTemplates"]),
            prompts=tuple(types.Prompt.model_validate(p) for p in data["prompts"]),
            complete=bool(data.get("complete", True)),
        )


ChangeKind = Literal["tools", "resources", "prompts", "resource"]
_LIST_CHANGES: dict[type, ChangeKind] = {
    types.ToolListChangedNotification: "tools",
    types.ResourceListChangedNotification: "resources",
    types.PromptListChangedNotification: "prompts",
}


@dataclass(frozen=True)
class Change:
    """A backend said something changed: one of its lists (`*/list_changed`), or one resource (`uri`)."""

    backend: str
    kind: ChangeKind
    uri: str | None = None
    principal: str | None = None
    """Whose session said it, for a backend reached as each person (`per_principal.py`): only that principal's
    clients hear it. None: every client's concern."""


ChangeListener = Callable[[Change], None]


def change_of(backend: str, message: Any) -> Change | None:
    if isinstance(message, types.ResourceUpdatedNotification):
        return Change(backend, "resource", str(message.params.uri))
    kind = _LIST_CHANGES.get(type(message))
    return Change(backend, kind) if kind is not None else None


class BackendOffers:
    """One backend's offers as known now (from its manifest until a session lists them), and the event a
    `resources` or `prompts` `list_changed` sets so that its owner task learns them again."""

    def __init__(self, spec: BackendConfig, manifests: ManifestStore, routes: ResourceRoutes) -> None:
        self._spec = spec
        self._manifests = manifests
        self.routes = routes
        self.offers = manifests.load_offers(spec) or Offers()
        self.stale = anyio.Event()
        self._subscribed: set[str] = set()

    def subscribed(self, uri: str, on: bool) -> None:
        """A client's subscription to `uri` was made (or ended) at this backend."""
        if not on:
            self._subscribed.discard(uri)
        elif len(self._subscribed) < MAX_SUBSCRIBED:
            self._subscribed.add(uri)
        else:
            logger.bind(backend=self._spec.id).warning(
                "{} subscriptions kept: {} is not renewed after a restart", MAX_SUBSCRIBED, uri[:200]
            )

    async def resubscribe(self, session: ClientSession, limit: float) -> None:
        """A new session (after a restart) holds none of the last one's subscriptions: they are made again, so
        the clients' `resources/updated` keep coming."""
        if not self._subscribed or not self.offers.has("subscribe"):
            return
        log = logger.bind(backend=self._spec.id)
        for uri in sorted(self._subscribed):
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            try:
                with anyio.fail_after(limit):
                    await session.send_request(request, types.EmptyResult)
            except (TimeoutError, MCPError) as exc:
                log.warning("subscribing again to {} after the restart failed: {}", uri[:200], exc)
        log.info("subscribed again to {} resources", len(self._subscribed))

    async def learn(self, session: ClientSession, limit: float) -> None:
        """Lists them on a live session (the owner's); a backend that lists badly keeps its tools, and the
        IDE's own lists ask it live."""
        self.stale = anyio.Event()
        try:
            with anyio.fail_after(limit):
                offers = await learn(session)
        except (TimeoutError, MCPError, ValidationError) as exc:
            logger.bind(backend=self._spec.id).warning("listing resources and prompts failed: {}", exc)
            return
        self.offers = offers
        self.routes.listed(self._spec.id, offers.resources)
        self.routes.templates(self._spec.id, offers.templates)

    def keep(self) -> None:
        """Into the manifest, once its tools are there."""
        if self.offers.known:
            self._manifests.save_offers(self._spec, self.offers)


async def learn(session: ClientSession) -> Offers:
    """The capabilities the session's server declared and its lists, each up to `MAX_KEPT` items.

    Raises:
        MCPError, ValidationError, TimeoutError (the caller bounds it) for a backend that lists badly.
    """
    caps = session.server_capabilities or types.ServerCapabilities()
    complete = True

    async def every(send: Callable[[str | None], Awaitable[_Page]], items: Callable[[_Page], list[Any]]) -> list[Any]:
        nonlocal complete
        kept: list[Any] = []
        cursor: str | None = None
        while True:
            try:
                page = await send(cursor)
            except MCPError as exc:
                # Servers on the SDK declare `resources` with a resources/list handler alone, and then answer
                # resources/templates/list with "Method not found": nothing to list, no fault of theirs.
                if exc.code == types.METHOD_NOT_FOUND and cursor is None:
                    return []
                raise
            kept.extend(items(page))
            cursor = page.next_cursor
            if len(kept) >= MAX_KEPT:
                if cursor or len(kept) > MAX_KEPT:
                    complete = False
                return kept[:MAX_KEPT]
            if not cursor:
                return kept

    def params(cursor: str | None) -> types.PaginatedRequestParams | None:
        return types.PaginatedRequestParams(cursor=cursor) if cursor else None

    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    prompts: list[types.Prompt] = []
    if caps.resources is not None:
        resources = await every(
            lambda c: session.send_request(types.ListResourcesRequest(params=params(c)), types.ListResourcesResult),
            lambda page: page.resources,
        )
        templates = await every(
            lambda c: session.send_request(
                types.ListResourceTemplatesRequest(params=params(c)), types.ListResourceTemplatesResult
            ),
            lambda page: page.resource_templates,
        )
    if caps.prompts is not None:
        prompts = await every(
            lambda c: session.send_request(types.ListPromptsRequest(params=params(c)), types.ListPromptsResult),
            lambda page: page.prompts,
        )
    return Offers(caps, tuple(resources), tuple(templates), tuple(prompts), complete)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
