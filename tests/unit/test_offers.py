"""Resources, prompts and completions through the gateway's `Offerings`, in process: the cursor codec, the
routing table, the filters, and real supervisors over memory connections to real low-level MCP servers."""

from __future__ import annotations

import base64
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from agentify.backends.manifest import ManifestStore
from agentify.backends.routes import ResourceRoutes
from agentify.backends.state import BackendState
from agentify.backends.stderr_log import StderrLog
from agentify.backends.supervisor import Supervisor
from agentify.config import BackendConfig, ItemFilter
from agentify.config.server import LimitsConfig
from agentify.errors import RateLimited
from agentify.gateway import cursors
from agentify.gateway.offers import Offerings
from agentify.mcp_server.offers import ChangeRelay
from agentify.team.limits import Limiter
from tests.fakes.memory_connection import MemoryConnection

pytestmark = pytest.mark.anyio


# ----- the cursor codec ------------------------------------------------------------------------


def test_a_cursor_keeps_the_backend_and_its_own_cursor() -> None:
    for inner in ("page-2", None, "ü/{}\"'"):
        position = cursors.Position("fs", inner)
        assert cursors.decode("resources", cursors.encode("resources", position)) == position


@pytest.mark.parametrize("cursor", ["", "not base64!", "W10", "eyJhIjoxfQ", "x" * 9000])
def test_a_cursor_the_gateway_never_gave_is_refused(cursor: str) -> None:
    with pytest.raises(cursors.BadCursor):
        cursors.decode("resources", cursor)


def test_the_longest_cursor_the_gateway_makes_is_one_it_reads_and_forged_nesting_is_refused() -> None:
    inner = "\u202e" * ((cursors.MAX_BACKEND_CURSOR_CHARS - 2) // 6)  # six characters each, in quotes
    assert cursors.passable(inner) and not cursors.passable(inner + "\u202e")
    position = cursors.Position("b" * 64, inner)
    assert cursors.decode("resourceTemplates", cursors.encode("resourceTemplates", position)) == position
    forged = base64.urlsafe_b64encode(b"[" * 6000).decode()
    with pytest.raises(cursors.BadCursor):
        cursors.decode("resources", forged)


def test_a_cursor_of_one_list_is_refused_by_another() -> None:
    with pytest.raises(cursors.BadCursor, match="prompts"):
        cursors.decode("prompts", cursors.encode("resources", cursors.Position("fs", "2")))


# ----- filters and the routing table -----------------------------------------------------------


def test_a_filter_denies_by_uri_or_name_and_allows_by_either() -> None:
    only_runs = ItemFilter(allow=["arbigent://runs/*"], deny=["*.html"])
    assert only_runs.permits("arbigent://runs/r1/result.yml", "r1/result.yml")
    assert not only_runs.permits("arbigent://runs/r1/report.html", "r1/report.html")
    assert not only_runs.permits("file:///etc/passwd", "passwd")
    by_name = ItemFilter(allow=["greeting*"])
    assert by_name.permits("demo://x", "greeting-1") and not by_name.permits("demo://x", None)
    assert ItemFilter().permits("anything", None)


@pytest.mark.parametrize(
    "uri",
    [
        "SECRET://vault/key",
        "secret://VAULT/key",
        "file:///./etc/passwd",
        "file:///srv/../etc/passwd",
        "file:///%65tc/passwd",
        "file:///srv/..%2Fetc/passwd",
        "file:///srv/%252e%252e/etc/passwd",
        "file:///etc//passwd",
        "file:///srv\\..\\etc/passwd",
    ],
)
def test_a_resource_deny_or_allow_holds_for_every_spelling_of_a_uri(uri: str) -> None:
    denied = ItemFilter(deny=["secret://*", "file:///etc/*"])
    assert not denied.permits_resource(uri, None)
    only_srv = ItemFilter(allow=["file:///srv/*", "secret://public/*"])
    assert not only_srv.permits_resource(uri, None)


def test_normalising_keeps_what_a_filter_lets_through() -> None:
    only_srv = ItemFilter(allow=["file:///srv/*"], deny=["file:///srv/private/*"])
    for uri in ("file:///srv/a.txt", "FILE:///srv/./b/../a.txt", "file:///srv/my%20file", "file:///%73rv/x"):
        assert only_srv.permits_resource(uri, None), uri
    assert not only_srv.permits_resource("file:///srv/public/../private/key", None)
    assert ItemFilter(allow=["file:///srv/my%20file"]).permits_resource("file:///srv/my%20file", None)
    assert ItemFilter(allow=["report"]).permits_resource("demo://x/../y", "report")  # allowed by its name


def links(*uris: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.ResourceLink(uri=u, name=u) for u in uris])


def test_a_carried_uri_goes_to_the_carrier_among_those_that_list_it_for_its_caller_only() -> None:
    routes = ResourceRoutes()
    routes.listed("a", [types.Resource(uri="x://shared", name="shared")])
    routes.listed("b", [types.Resource(uri="x://shared", name="shared")])
    assert routes.shared("x://shared")
    assert routes.owner("x://shared", ["a", "b"]) == "b"  # the later listing
    routes.carried("a", links("x://shared"), "bob")
    assert routes.owner("x://shared", ["a", "b"], "bob") == "a"
    assert routes.owner("x://shared", ["a", "b"], "alice") == "b"  # Bob's call taught Alice nothing
    assert routes.owner("x://shared", ["b"], "bob") == "b"  # only among those that offer resources now


def test_a_link_never_takes_a_uri_another_backend_lists_or_templates_for_anyone() -> None:
    """A hostile backend's tool links to another backend's resources: neither its caller nor anyone else reads
    them from it."""
    routes = ResourceRoutes()
    routes.listed("demo", [types.Resource(uri="demo://resource/static/1", name="one")])
    routes.templates("demo", [types.ResourceTemplate(uri_template="demo://resource/dynamic/{id}", name="item")])
    routes.carried("hostile", links("demo://resource/static/1", "demo://resource/dynamic/7", "demo://other"), "bob")
    for principal in ("bob", "alice", None):
        assert routes.owner("demo://resource/static/1", ["demo", "hostile"], principal) == "demo"
        assert routes.owner("demo://resource/dynamic/7", ["demo", "hostile"], principal) == "demo"
    assert routes.owner("demo://other", ["demo", "hostile"], "bob") == "hostile"  # its own link, no one else's
    assert routes.owner("demo://other", ["demo", "hostile"], "alice") == "demo"  # by scheme: only demo, for her
    assert routes.owner("demo://unknown", ["demo", "hostile"], "bob") is None  # the scheme is two backends' for Bob


def test_an_unlisted_uri_goes_by_template_then_by_scheme_then_to_a_lone_backend() -> None:
    routes = ResourceRoutes()
    routes.templates("a", [types.ResourceTemplate(uri_template="demo://item/{id}", name="item")])
    routes.templates("b", [types.ResourceTemplate(uri_template="demo://item/special/{id}", name="special")])
    routes.carried("c", links("arbigent://runs/1/report.html"))
    assert routes.owner("demo://item/7", ["a", "b", "c"]) == "a"
    assert routes.owner("demo://item/special/7", ["a", "b", "c"]) == "b"  # the longer literal prefix
    assert routes.owner("arbigent://runs/2/result.yml", ["a", "b", "c"]) == "c"  # stdio's one user
    assert routes.owner("arbigent://runs/2/result.yml", ["a", "b", "c"], "alice") is None  # not hers
    assert routes.owner("file:///tmp/x", ["a", "b", "c"]) is None
    assert routes.owner("file:///tmp/x", ["a"]) == "a"


# ----- real supervisors ------------------------------------------------------------------------


def paged_server(prefix: str, count: int, page: int) -> dict[str, Any]:
    """Handlers of a server with `count` resources in pages of `page`, a template, two prompts, completions."""
    resources = [types.Resource(uri=f"{prefix}://r/{i}", name=f"r{i}") for i in range(count)]

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        start = int(params.cursor) if params and params.cursor else 0
        end = start + page
        return types.ListResourcesResult(resources=resources[start:end], next_cursor=str(end) if end < count else None)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(uri_template=f"{prefix}://t/{{id}}", name="item")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        text = f"{prefix} reads {params.uri}"
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=str(params.uri), text=text)])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="greet"), types.Prompt(name="secret")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        said = types.TextContent(text=f"{prefix} {params.name} {params.arguments}")
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=said)])

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        seen = ref.name if isinstance(ref, types.PromptReference) else ref.uri
        return types.CompleteResult(completion=types.Completion(values=[f"{prefix}:{seen}:{params.argument.value}"]))

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read,
        "on_list_prompts": list_prompts,
        "on_get_prompt": get_prompt,
        "on_completion": complete,
    }


@dataclass
class Fleet:
    supervisors: list[Supervisor]
    connections: dict[str, MemoryConnection]
    routes: ResourceRoutes = field(default_factory=ResourceRoutes)

    def enabled(self) -> Sequence[Supervisor]:
        return self.supervisors


@asynccontextmanager
async def fleet(
    cache: Path | None, failing: tuple[str, ...] = (), **backends: tuple[dict[str, Any], dict[str, Any]]
) -> AsyncIterator[Fleet]:
    """Supervisors of `id=(config extra, handlers)`, running; their states settled. `failing` ones cannot start."""
    routes = ResourceRoutes()
    manifests = ManifestStore(cache)
    connections = {name: MemoryConnection(handlers=handlers) for name, (_, handlers) in backends.items()}
    for name in failing:
        connections[name].fail_opens = [OSError("no such file")] * 10
    supervisors = [
        Supervisor(
            BackendConfig.model_validate({"id": name, "command": "memory", "startupTimeoutSeconds": 5} | extra),
            connections[name],
            StderrLog(name),
            manifests,
            routes=routes,
        )
        for name, (extra, _) in backends.items()
    ]
    async with anyio.create_task_group() as tg:
        for supervisor in supervisors:
            tg.start_soon(supervisor.run)
        for supervisor in supervisors:
            await supervisor.wait_settled()
        yield Fleet(supervisors, connections, routes)
        for supervisor in supervisors:
            supervisor.stop()


async def every_resource(offerings: Offerings) -> tuple[list[str], int]:
    uris: list[str] = []
    cursor: str | None = None
    pages = 0
    with anyio.fail_after(10):
        while True:
            page = await offerings.list_resources(cursor)
            pages += 1
            uris.extend(str(r.uri) for r in page.resources)
            cursor = page.next_cursor
            if cursor is None:
                return uris, pages


async def test_resources_are_listed_a_backend_page_at_a_time_and_read_from_their_owner() -> None:
    async with fleet(None, a=({}, paged_server("a", 5, 2)), b=({}, paged_server("b", 1, 10))) as backends:
        offerings = Offerings(backends)
        uris, pages = await every_resource(offerings)
        assert uris == [f"a://r/{i}" for i in range(5)] + ["b://r/0"]
        assert pages == 4  # a: 2 + 2 + 1, b: 1
        read = await offerings.read_resource("b://r/0")
        assert [c.text for c in read.contents if isinstance(c, types.TextResourceContents)] == ["b reads b://r/0"]
        templated = await offerings.read_resource("a://t/42")  # never listed: its template names the owner
        assert templated.contents[0].uri == "a://t/42"
        with pytest.raises(MCPError) as refused:
            await offerings.list_prompts(cursors.encode("resources", cursors.Position("a", "2")))
        assert refused.value.error.code == types.INVALID_PARAMS


async def test_a_backend_cursor_too_long_to_pass_on_ends_that_backends_pages_not_the_list() -> None:
    handlers = paged_server("a", 5, 2)

    async def long_cursor(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="a://r/0", name="r0")], next_cursor="x" * 7000)

    handlers["on_list_resources"] = long_cursor
    async with fleet(None, a=({}, handlers), b=({}, paged_server("b", 1, 10))) as backends:
        uris, pages = await every_resource(Offerings(backends))
    assert (uris, pages) == (["a://r/0", "b://r/0"], 2)


async def test_denied_resources_and_prompts_are_neither_listed_nor_read() -> None:
    deny = {"resources": {"deny": ["a://r/1", "r3"]}, "prompts": {"deny": ["secret"]}}
    async with fleet(None, a=(deny, paged_server("a", 4, 10))) as backends:
        offerings = Offerings(backends)
        uris, _ = await every_resource(offerings)
        assert uris == ["a://r/0", "a://r/2"]
        spellings = ("A://r/1", "a://R/1", "a://r/./1", "a://r/x/../1", "a://r/%31", "a://r/%2531")
        for uri in ("a://r/1", "a://r/3", *spellings):  # the backend would read each as a://r/1
            with pytest.raises(MCPError) as denied:
                await offerings.read_resource(uri)
            assert denied.value.error.code == types.INVALID_PARAMS
        assert [p.name for p in (await offerings.list_prompts(None)).prompts] == ["a__greet"]
        with pytest.raises(MCPError, match="Unknown prompt"):
            await offerings.get_prompt("a__secret", None)


async def test_reads_prompts_and_completions_count_against_the_backends_limit_as_calls_do() -> None:
    """`perBackend` counts every operation that reaches the backend, with the real limiter (in memory)."""
    limiter = Limiter(LimitsConfig(per_backend={"a": "3/minute"}))
    async with fleet(None, a=({}, paged_server("a", 2, 10)), b=({}, paged_server("b", 1, 10))) as backends:
        offerings = Offerings(backends, charge=limiter.charge_backend)
        await every_resource(offerings)  # listing is not counted: it serves every client's view
        argument = types.CompletionArgument(name="who", value="y")
        prompt = types.CompleteRequestParams(ref=types.PromptReference(name="a__greet"), argument=argument)
        await offerings.read_resource("a://r/0")
        await offerings.get_prompt("a__greet", None)
        await offerings.complete(prompt)
        with pytest.raises(RateLimited, match="backend 'a' is over its limit of 3 per minute"):
            await offerings.read_resource("a://r/1")
        with pytest.raises(RateLimited, match="backend 'a' is over its limit"):
            await offerings.get_prompt("a__greet", None)
        assert (await offerings.read_resource("b://r/0")).contents  # another backend's limit is its own


async def test_prompts_and_completions_reach_the_backend_under_its_own_names() -> None:
    async with fleet(None, a=({}, paged_server("a", 0, 1)), a__b=({}, paged_server("ab", 0, 1))) as backends:
        offerings = Offerings(backends)
        first = await offerings.list_prompts(None)
        assert first.next_cursor is not None  # a page per backend
        second = await offerings.list_prompts(first.next_cursor)
        names = [p.name for p in [*first.prompts, *second.prompts]]
        assert (names, second.next_cursor) == (["a__greet", "a__secret", "a__b__greet", "a__b__secret"], None)
        got = await offerings.get_prompt("a__b__greet", {"who": "you"})
        assert got.messages[0].content == types.TextContent(text="ab greet {'who': 'you'}")
        argument = types.CompletionArgument(name="who", value="y")
        prompt = types.CompleteRequestParams(ref=types.PromptReference(name="a__greet"), argument=argument)
        assert (await offerings.complete(prompt)).completion.values == ["a:greet:y"]
        template = types.CompleteRequestParams(
            ref=types.ResourceTemplateReference(uri="ab://t/{id}"), argument=argument
        )
        assert (await offerings.complete(template)).completion.values == ["ab:ab://t/{id}:y"]
        # The memory server serves subscriptions/listen: on 2026-07-28 it can announce changes and updates.
        assert offerings.capabilities() == {
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
        }


async def test_without_prefix_a_prompt_keeps_its_name_unless_another_backend_has_one_so_named() -> None:
    """Both backends have `greet`, so it stays `<backend>__greet` on each; `secret` is denied on b, so a's is alone."""
    servers = {"a": ({}, paged_server("a", 0, 1)), "b": ({"prompts": {"deny": ["secret"]}}, paged_server("b", 0, 1))}
    async with fleet(None, **servers) as backends:
        offerings = Offerings(backends, prefix=lambda: False)
        first = await offerings.list_prompts(None)
        second = await offerings.list_prompts(first.next_cursor)
        assert [p.name for p in [*first.prompts, *second.prompts]] == ["a__greet", "secret", "b__greet"]
        got = await offerings.get_prompt("secret", None)
        assert got.messages[0].content == types.TextContent(text="a secret None")
        assert (await offerings.get_prompt("b__greet", None)).messages[0].content.text.startswith("b greet")  # type: ignore[union-attr]
        argument = types.CompletionArgument(name="who", value="y")
        bare = types.CompleteRequestParams(ref=types.PromptReference(name="secret"), argument=argument)
        assert (await offerings.complete(bare)).completion.values == ["a:secret:y"]
        with pytest.raises(MCPError, match="Unknown prompt: greet"):
            await offerings.get_prompt("greet", None)  # shared: which backend's is not guessed
        prefixed = [p.name for p in (await Offerings(backends).list_prompts(None)).prompts]
        assert prefixed == ["a__greet", "a__secret"]  # the default


async def test_a_lazy_backend_lists_from_its_manifest_without_starting(tmp_path: Path) -> None:
    async with fleet(tmp_path, a=({}, paged_server("a", 3, 2))) as backends:  # learns, and keeps the manifest
        assert backends.supervisors[0].state is BackendState.READY
    async with fleet(tmp_path, a=({"start": "lazy"}, paged_server("a", 3, 2))) as backends:
        offerings = Offerings(backends)
        uris, pages = await every_resource(offerings)
        prompts = (await offerings.list_prompts(None)).prompts
        assert (uris, pages, [p.name for p in prompts]) == (
            ["a://r/0", "a://r/1", "a://r/2"],
            1,
            ["a__greet", "a__secret"],
        )
        assert backends.supervisors[0].state is BackendState.IDLE and backends.connections["a"].opens == 0
        assert "resources" in offerings.capabilities()
        await offerings.read_resource("a://r/2")  # a read starts it
        assert backends.connections["a"].opens == 1


async def test_a_backend_without_resources_adds_no_capability() -> None:
    async with fleet(None, plain=({}, {})) as backends:
        assert Offerings(backends).capabilities() == {}
        assert (await Offerings(backends).list_resources(None)).resources == []


async def test_a_failed_backend_is_left_out_of_lists_without_waiting_for_its_restart() -> None:
    servers = {"a": ({}, paged_server("a", 1, 10)), "b": ({}, paged_server("b", 1, 10))}
    async with fleet(None, failing=("a",), **servers) as backends:
        assert backends.supervisors[0].state is BackendState.FAILED
        with anyio.fail_after(2):  # its backoff and start-up timeout would be longer
            uris, _ = await every_resource(Offerings(backends))
    assert uris == ["b://r/0"]


async def test_a_cursor_naming_a_backend_learnt_to_offer_nothing_goes_on_to_the_next() -> None:
    """The first page can be given while a backend is still starting, so its offers are not known yet."""
    servers = {"a": ({}, paged_server("a", 1, 10)), "b": ({}, {}), "c": ({}, paged_server("c", 1, 10))}
    async with fleet(None, **servers) as backends:
        offerings = Offerings(backends)
        page = await offerings.list_resources(cursors.encode("resources", cursors.Position("b", None)))
        assert ([str(r.uri) for r in page.resources], page.next_cursor) == (["c://r/0"], None)
        with pytest.raises(MCPError, match="'gone' is gone"):
            await offerings.list_resources(cursors.encode("resources", cursors.Position("gone", None)))


async def test_refused_subscriptions_are_not_kept() -> None:
    """60 subscriptions to 100 KB URIs nobody owns: each is refused, and nothing of them stays in memory."""
    async with fleet(None, a=({}, paged_server("a", 1, 10)), b=({}, paged_server("b", 1, 10))) as backends:
        relay = ChangeRelay(Offerings(backends))
        async with anyio.create_task_group() as tg:
            await tg.start(relay.run)
            client: Any = object()  # a client's connection: only its identity counts here
            with pytest.raises(MCPError):  # warms up what every refusal uses
                await relay.subscribe(client, "nobody://warm-up", subscribe=True)
            tracemalloc.start()
            try:
                before = tracemalloc.take_snapshot()
                for n in range(60):
                    with pytest.raises(MCPError):
                        await relay.subscribe(client, f"nobody://{n}/" + "x" * 100_000, subscribe=True)
                grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
            finally:
                tracemalloc.stop()
            relay.close()
    assert grown < 1_000_000, grown  # kept, they were 6 MB


def test_the_routing_table_and_a_not_found_error_stay_bounded() -> None:
    from agentify.backends import routes as routing
    from agentify.gateway.offers import not_found

    table = ResourceRoutes()
    many = [
        types.ResourceTemplate(uri_template=f"s{i}://t/{{id}}", name="t") for i in range(routing.MAX_PER_BACKEND + 50)
    ]
    table.templates("a", many)
    table.listed("a", [types.Resource(uri=f"x{i}://r", name="r") for i in range(routing.MAX_PER_BACKEND + 50)])
    assert table.template_owner("s0://t/1", ["a"]) is None  # the oldest was forgotten
    assert table.template_owner(f"s{routing.MAX_PER_BACKEND + 49}://t/1", ["a"]) == "a"
    assert table.owner("x0://elsewhere", ["a", "b"]) is None and table.owner("x1049://elsewhere", ["a", "b"]) == "a"
    error = not_found("file:///" + "a" * 100_000).error
    assert len(error.message) < 2200 and "100008 characters" in error.message
