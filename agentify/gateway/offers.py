"""Everything the backends offer beside tools, as one server: resources, templates, prompts, completions.

Lists are paginated a backend at a time: one page of the IDE is one page of one backend, and the
gateway's cursor (`cursors.py`) says which backend and its own cursor. A backend that is not running
and whose manifest knows its lists (a lazy or idle one) answers from the manifest without being
started; a backend that failed is left out of the list (and logged). Resource URIs pass unchanged;
reads and completions go to the owner that `ResourceRoutes` learnt. Prompts are `<backend>__<prompt>`, or
keep their own name with config `prefix: false` where no other backend lists a prompt of that name (the
names are compared in what each backend's offers know, so a listing does not depend on paging).
The `resources` and `prompts` filters of a backend hide what they deny from lists and from reads.
What `server.access` does not let the request's principal use is left out of its lists, and using it
is refused (`Forbidden`, before the backend is asked).

Errors: `MCPError` with the JSON-RPC code the IDE should see (a backend's own refusal is passed on);
`AgentifyError` when a backend cannot answer at all (the adapter turns it into an internal error).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from loguru import logger
from mcp.shared.exceptions import MCPError

from agentify.backends.offers import BackendOffers, Offers
from agentify.backends.routes import ResourceRoutes
from agentify.backends.state import ENDED_BADLY, BackendState
from agentify.config import BackendConfig
from agentify.errors import AgentifyError
from agentify.gateway import cursors
from agentify.team.access import Access
from agentify.team.policy import Target
from agentify.team.principal import current_principal

NAME_SEP = "__"  # `<backend>__<prompt>`, and a resource name two backends list
_STARTING = (BackendState.STARTING, BackendState.RESTARTING, BackendState.STOPPED)
_R = TypeVar("_R", bound=types.Result)


class OfferingBackend(Protocol):
    """What this module uses of a backend's supervisor."""

    spec: BackendConfig
    offers: BackendOffers
    personal: bool

    @property
    def state(self) -> BackendState: ...

    async def request(self, request: types.ClientRequest, result_type: type[_R]) -> _R: ...

    async def wait_settled(self, seconds: float | None = None) -> None: ...


class Backends(Protocol):
    routes: ResourceRoutes

    def enabled(self) -> Sequence[OfferingBackend]: ...


@dataclass(frozen=True)
class Page:
    """One backend's page, as the IDE sees it, and the backend's own cursor to the next one."""

    items: list[Any]
    next_cursor: str | None


Fetch = Callable[[OfferingBackend, str | None], Awaitable[Page]]


MAX_URI_SHOWN = 2048
"""How much of a client's URI a not-found error echoes back."""


def not_found(uri: str) -> MCPError:
    """The one answer for a URI no backend owns and for one a filter denies: they look the same. Invalid params,
    as the SDK's own servers answer (SEP-2164)."""
    shown = uri if len(uri) <= MAX_URI_SHOWN else uri[:MAX_URI_SHOWN] + f"... ({len(uri)} characters)"
    return MCPError(types.INVALID_PARAMS, f"Resource not found: {shown}", {"uri": shown})


Charge = Callable[[str], Awaitable[None]]
"""Counts one operation against a backend's rate limit (`Limiter.charge_backend`); raises RateLimited."""


async def _uncounted(backend: str) -> None:
    return None


class Offerings:
    def __init__(
        self,
        backends: Backends,
        prefix: Callable[[], bool] = lambda: True,
        charge: Charge = _uncounted,
        access: Callable[[], Access] = lambda: Access(None),
    ) -> None:
        """`prefix`: whether prompts are named `<backend>__<prompt>` even where no two backends share a name
        (config `prefix`, read at each request so that a reloaded config applies). `charge`: every read,
        subscription, prompt and completion that reaches a backend counts against its `perBackend` limit, as
        its tool calls do. `access`: the `server.access` decisions in force."""
        self._backends = backends
        self._prefix = prefix
        self._charge = charge
        self._access = access

    # ----- resources -------------------------------------------------------------------------

    async def list_resources(self, cursor: str | None) -> types.ListResourcesResult:
        page = await self._page("resources", cursor, "resources", self._resources_page)
        return types.ListResourcesResult(resources=page.items, next_cursor=page.next_cursor)

    async def list_templates(self, cursor: str | None) -> types.ListResourceTemplatesResult:
        page = await self._page("resourceTemplates", cursor, "resources", self._templates_page)
        return types.ListResourceTemplatesResult(resource_templates=page.items, next_cursor=page.next_cursor)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """The owner's answer, unchanged. Raises MCPError (`not_found`, or the backend's), AgentifyError."""
        owner = await self.resource_owner(uri)
        self._access().check(Target("read", "Resource", uri, owner.spec.id, uri), {"uri": uri})
        await self._charge(owner.spec.id)
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        return await owner.request(request, types.ReadResourceResult)

    async def resource_owner(self, uri: str) -> OfferingBackend:
        """The backend that reads `uri`, when its filter lets it. Raises MCPError (`not_found`)."""
        await self.settle()
        candidates = self._offering("resources")
        by_id = {b.spec.id: b for b in candidates}
        owner_id = self._backends.routes.owner(uri, list(by_id), current_principal())
        owner = by_id.get(owner_id) if owner_id is not None else None
        if owner is None or not owner.spec.resources.permits_resource(uri, self._backends.routes.name(uri)):
            raise not_found(uri)
        return owner

    async def personal(self, uri: str) -> bool:
        """Whether `uri` belongs to a backend reached as each person (a subscription is each principal's own)."""
        try:
            return (await self.resource_owner(uri)).personal
        except MCPError:
            return False  # nobody owns it: subscribing says so

    async def subscribe(self, uri: str, *, subscribe: bool = True) -> bool:
        """(Un)subscribes at the owner where it supports it; False where it does not (nothing to relay)."""
        owner = await self.resource_owner(uri)
        if subscribe:
            self._access().check(Target("read", "Resource", uri, owner.spec.id, uri), {"uri": uri})
        if not owner.offers.offers.has("subscribe"):
            return False
        if subscribe:
            await self._charge(owner.spec.id)
        request: types.ClientRequest
        if subscribe:
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
        else:
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        await owner.request(request, types.EmptyResult)
        owner.offers.subscribed(uri, subscribe)  # made again if the backend restarts
        return True

    async def _resources_page(self, backend: OfferingBackend, cursor: str | None) -> Page:
        spec, routes = backend.spec, self._backends.routes
        if (cached := _cached(backend, cursor)) is not None:
            resources = list(cached.resources)
            next_cursor = None
        else:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await backend.request(types.ListResourcesRequest(params=params), types.ListResourcesResult)
            resources, next_cursor = result.resources, result.next_cursor
        routes.listed(spec.id, resources)
        access = self._access()
        shown = [
            r.model_copy(update={"name": f"{spec.id}{NAME_SEP}{r.name}"}) if routes.shared(str(r.uri)) else r
            for r in resources
            if spec.resources.permits_resource(str(r.uri), r.name)
            and access.shows(Target("read", "Resource", str(r.uri), spec.id, str(r.uri)))
        ]
        return Page(shown, next_cursor)

    async def _templates_page(self, backend: OfferingBackend, cursor: str | None) -> Page:
        spec = backend.spec
        if (cached := _cached(backend, cursor)) is not None:
            templates, next_cursor = list(cached.templates), None
        else:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await backend.request(
                types.ListResourceTemplatesRequest(params=params), types.ListResourceTemplatesResult
            )
            templates, next_cursor = result.resource_templates, result.next_cursor
        self._backends.routes.templates(spec.id, templates)
        access = self._access()
        return Page(
            [
                t
                for t in templates
                if spec.resources.permits_resource(t.uri_template, t.name)
                and access.shows(Target("read", "Resource", t.uri_template, spec.id, t.uri_template))
            ],
            next_cursor,
        )

    # ----- prompts and completions -------------------------------------------------------------

    async def list_prompts(self, cursor: str | None) -> types.ListPromptsResult:
        if not self._prefix():
            await self.settle()  # a name is shown bare only when every backend's prompts are known
        page = await self._page("prompts", cursor, "prompts", self._prompts_page)
        return types.ListPromptsResult(prompts=page.items, next_cursor=page.next_cursor)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        backend, prompt = await self._prompt_owner(name)
        self._access().check(_prompt_target("prompt", backend, prompt), {"arguments": arguments or {}})
        await self._charge(backend.spec.id)
        params = types.GetPromptRequestParams(name=prompt, arguments=arguments)
        return await backend.request(types.GetPromptRequest(params=params), types.GetPromptResult)

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Routes a prompt argument's completion by the prompt's name, a template's by its URI."""
        ref = params.ref
        argument = {"argument": {"name": params.argument.name, "value": params.argument.value}}
        if isinstance(ref, types.PromptReference):
            backend, prompt = await self._prompt_owner(ref.name)
            self._access().check(_prompt_target("complete", backend, prompt), argument)
            params = params.model_copy(update={"ref": ref.model_copy(update={"name": prompt})})
        else:
            backend = await self.resource_owner(ref.uri)
            self._access().check(Target("complete", "Resource", ref.uri, backend.spec.id, ref.uri), argument)
        if not backend.offers.offers.has("completions") and backend.offers.offers.known:
            return types.CompleteResult(completion=types.Completion(values=[]))
        await self._charge(backend.spec.id)
        return await backend.request(types.CompleteRequest(params=params), types.CompleteResult)

    async def _prompt_owner(self, name: str) -> tuple[OfferingBackend, str]:
        """(backend, its own prompt name) for the name `prompts/list` shows. A bare name is the one backend's
        that lists it alone (`prefix: false`); `<backend>__<prompt>` is always understood, and where two backend
        ids could be the prefix (`a` and `a__b`), the one that lists such a prompt wins, else the longer id.
        Raises MCPError."""
        await self.settle()
        offering = self._offering("prompts")
        if (owner := self._bare_prompts().get(name)) is not None:
            return next(b for b in offering if b.spec.id == owner), name
        matches = [
            (b, name[len(b.spec.id) + len(NAME_SEP) :]) for b in offering if name.startswith(b.spec.id + NAME_SEP)
        ]
        known = [(b, p) for b, p in matches if any(k.name == p for k in b.offers.offers.prompts)]
        for backend, prompt in sorted(known or matches, key=lambda m: -len(m[0].spec.id)):
            if prompt and backend.spec.prompts.permits(prompt):
                return backend, prompt
        named = "<backend>__<prompt>" + (" or, where no other backend has it, <prompt>" if not self._prefix() else "")
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name} (prompts are named {named})")

    def _bare_prompts(self) -> dict[str, str]:
        """With `prefix: false`, the prompts shown under their own name: each that exactly one backend lists (and
        lets be seen), with that backend's id. Empty with `prefix: true`."""
        if self._prefix():
            return {}
        owners: dict[str, list[str]] = {}
        for backend in self._offering("prompts"):
            for name in {p.name for p in backend.offers.offers.prompts if backend.spec.prompts.permits(p.name)}:
                owners.setdefault(name, []).append(backend.spec.id)
        return {name: ids[0] for name, ids in owners.items() if len(ids) == 1}

    async def _prompts_page(self, backend: OfferingBackend, cursor: str | None) -> Page:
        spec = backend.spec
        if (cached := _cached(backend, cursor)) is not None:
            prompts, next_cursor = list(cached.prompts), None
        else:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await backend.request(types.ListPromptsRequest(params=params), types.ListPromptsResult)
            prompts, next_cursor = result.prompts, result.next_cursor
        bare = self._bare_prompts()
        access = self._access()
        shown = [
            p if bare.get(p.name) == spec.id else p.model_copy(update={"name": f"{spec.id}{NAME_SEP}{p.name}"})
            for p in prompts
            if spec.prompts.permits(p.name) and access.shows(_prompt_target("prompt", backend, p.name))
        ]
        return Page(shown, next_cursor)

    # ----- what the gateway declares ----------------------------------------------------------

    async def settle(self, seconds: float | None = None) -> None:
        """Waits for the backends whose offers are not known yet (first start, no manifest): at most `seconds`,
        else each its own start-up timeout. Routing needs what they offer; a failed one stays unknown."""
        unknown = [b for b in self._backends.enabled() if not b.offers.offers.known and b.state in _STARTING]
        if not unknown:
            return
        with anyio.move_on_after(seconds if seconds is not None else math.inf):
            async with anyio.create_task_group() as tg:
                for backend in unknown:
                    tg.start_soon(backend.wait_settled, seconds)  # None: its own start-up timeout

    def capabilities(self) -> dict[str, Any]:
        """What the backends offer, as the gateway's `capabilities` (wire form). A backend whose offers are not
        known yet counts as offering resources, prompts and completions: a list that turns out empty costs the
        IDE less than a capability it never learns about for the whole session."""
        backends = self._backends.enabled()
        known = [b.offers.offers for b in backends if b.offers.offers.known]
        unknown = len(known) < len(backends)
        caps = [c for c in (o.capabilities for o in known) if c is not None]
        declared: dict[str, Any] = {}
        if unknown or any(c.resources for c in caps):
            declared["resources"] = {
                "subscribe": any(c.resources and c.resources.subscribe for c in caps),
                "listChanged": unknown or any(c.resources and c.resources.list_changed for c in caps),
            }
        if unknown or any(c.prompts for c in caps):
            declared["prompts"] = {"listChanged": unknown or any(c.prompts and c.prompts.list_changed for c in caps)}
        if unknown or any(c.completions for c in caps):
            declared["completions"] = {}
        return declared

    # ----- paging --------------------------------------------------------------------------------

    def _offering(self, what: str) -> list[OfferingBackend]:
        """The enabled backends that offer `what` (or may: not learnt yet), in config order."""
        return [b for b in self._backends.enabled() if not b.offers.offers.known or b.offers.offers.has(what)]

    async def _page(self, listing: str, cursor: str | None, what: str, fetch: Fetch) -> Page:
        """One page: the backend the cursor names (the first one without a cursor), going on to the next
        backend while pages come back empty. A backend learnt meanwhile to offer nothing is passed over.
        Raises MCPError (INVALID_PARAMS) for a cursor not ours, or naming a backend that is gone."""
        backends = list(self._backends.enabled())
        ids = [b.spec.id for b in backends]
        index, inner = 0, None
        if cursor is not None:
            try:
                position = cursors.decode(listing, cursor)
            except cursors.BadCursor as exc:
                raise MCPError(types.INVALID_PARAMS, f"invalid cursor: {exc}") from None
            if position.backend not in ids:
                raise MCPError(types.INVALID_PARAMS, f"invalid cursor: backend {position.backend!r} is gone")
            index, inner = ids.index(position.backend), position.cursor
        page = Page([], None)
        while (at := _next_offering(backends, index, what)) is not None:
            if page.items:  # the previous backend is done: the next page starts at this one
                return Page(page.items, cursors.encode(listing, cursors.Position(ids[at], None)))
            page = await _fetched(listing, fetch, backends[at], inner if at == index else None)
            if page.next_cursor and not cursors.passable(page.next_cursor):
                logger.bind(backend=ids[at]).warning(
                    "backend {!r} gave a {}-character cursor for its next page of {} (agentify passes on at most "
                    "{}): its further pages are left out; ask its maintainers for shorter cursors",
                    ids[at],
                    len(page.next_cursor),
                    listing,
                    cursors.MAX_BACKEND_CURSOR_CHARS,
                )
                page = Page(page.items, None)
            if page.next_cursor:
                return Page(page.items, cursors.encode(listing, cursors.Position(ids[at], page.next_cursor)))
            index, inner = at + 1, None
        return Page(page.items, None)


def _prompt_target(action: str, backend: OfferingBackend, prompt: str) -> Target:
    """A prompt as `server.access` knows it: `<backend>__<prompt>`, whatever name the list shows."""
    return Target(action, "Prompt", f"{backend.spec.id}{NAME_SEP}{prompt}", backend.spec.id, prompt)


def _next_offering(backends: Sequence[OfferingBackend], start: int, what: str) -> int | None:
    """The index of the first backend from `start` that offers `what` (or may: not learnt yet)."""
    for index in range(start, len(backends)):
        offers = backends[index].offers.offers
        if not offers.known or offers.has(what):
            return index
    return None


async def _fetched(listing: str, fetch: Fetch, backend: OfferingBackend, cursor: str | None) -> Page:
    """A backend that cannot answer leaves the list, not the IDE without one; a failed one is not waited for."""
    try:
        if backend.state in ENDED_BADLY and _cached(backend, cursor) is None:
            raise AgentifyError(f"it is {backend.state.value}; it is retried on the next call")
        return await fetch(backend, cursor)
    except (AgentifyError, MCPError) as exc:
        logger.bind(backend=backend.spec.id).warning("left out of {}: {}", listing, exc)
        return Page([], None)


def _cached(backend: OfferingBackend, cursor: str | None) -> Offers | None:
    """The manifest's offers when they answer a first page without starting the backend: it is not running,
    and they are known and whole."""
    offers = backend.offers.offers
    running = backend.state in (BackendState.READY, BackendState.STARTING, BackendState.RESTARTING)
    return offers if cursor is None and not running and offers.known and offers.complete else None
