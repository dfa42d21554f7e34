from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from agentify.backends.manifest import ManifestStore, cache_dir, manifest_key
from agentify.backends.offers import Offers
from agentify.config import BackendConfig

TOOL = types.Tool(name="echo", description="Echo", input_schema={"type": "object"})


def test_cache_dir_prefers_agentify_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIFY_CACHE_DIR", "/a")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert cache_dir() == Path("/a")
    monkeypatch.setenv("AGENTIFY_CACHE_DIR", "relative/a")  # only an absolute path counts
    assert cache_dir() == Path("/x/agentify")
    monkeypatch.delenv("AGENTIFY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/x")  # ignored, as the XDG spec asks
    assert cache_dir() == Path.home() / ".cache" / "agentify"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "agentify"


def test_key_depends_on_how_it_starts_with_env_values_and_cwd_but_not_on_the_id() -> None:
    base = BackendConfig(id="a", command="node", args=["s.js"], env={"TOKEN": "one"}, cwd="/projects/a")
    assert manifest_key(base) == manifest_key(base.model_copy(update={"id": "b"}))
    for changed in (
        {"env": {"TOKEN": "two"}},  # another project's credentials may show other tools
        {"env": {"OTHER": "one"}},
        {"args": ["t.js"]},
        {"cwd": "/projects/b"},
    ):
        assert manifest_key(base) != manifest_key(base.model_copy(update=changed)), changed
    remote = BackendConfig(id="r", url="http://127.0.0.1:1/mcp")
    assert manifest_key(remote) != manifest_key(BackendConfig(id="r", url="http://127.0.0.1:2/mcp"))


def test_saved_tools_load_back_and_secrets_stay_out(tmp_path: Path) -> None:
    store = ManifestStore(tmp_path)
    spec = BackendConfig(id="a", command="node", env={"TOKEN": "secret-value-123"})
    assert store.load(spec) is None
    store.save(spec, [TOOL])
    assert store.load(spec) == [TOOL]
    path = store.path(spec)
    assert path is not None and "secret-value-123" not in path.read_text()


def test_an_unreadable_manifest_is_ignored(tmp_path: Path) -> None:
    store = ManifestStore(tmp_path)
    spec = BackendConfig(id="a", command="node")
    path = store.path(spec)
    assert path is not None
    path.parent.mkdir(parents=True)
    for content in ("not json", '{"format": 1, "tools": [{"name": 5}]}', "[]", '{"format": 99, "tools": []}'):
        path.write_text(content)
        assert store.load(spec) is None


def test_offers_are_kept_beside_the_tools_and_an_older_manifest_still_loads(tmp_path: Path) -> None:
    store = ManifestStore(tmp_path)
    spec = BackendConfig(id="a", command="node")
    offers = Offers(
        capabilities=types.ServerCapabilities(resources=types.ResourcesCapability(subscribe=True)),
        resources=(types.Resource(uri="demo://x", name="x"),),
        prompts=(types.Prompt(name="greet"),),
    )
    store.save_offers(spec, offers)  # no tools kept yet: nothing is written, or it would read as "no tools"
    assert store.load(spec) is None and store.load_offers(spec) is None
    store.save(spec, [TOOL])
    assert store.load_offers(spec) is None  # a manifest of tools only, as older versions wrote it
    store.save_offers(spec, offers)
    store.save(spec, [TOOL, TOOL.model_copy(update={"name": "two"})])  # new tools keep the offers
    assert [t.name for t in store.load(spec) or []] == ["echo", "two"]
    assert store.load_offers(spec) == offers and (store.load_offers(spec) or Offers()).has("subscribe")


def test_a_read_only_store_reads_the_manifest_and_never_writes_it(tmp_path: Path) -> None:
    spec = BackendConfig(id="a", command="node")
    store = ManifestStore(tmp_path)
    store.save(spec, [TOOL])
    reader = store.read_only()  # an extra session's: another process of the backend
    other = TOOL.model_copy(update={"description": "Echo, and keep a copy"})
    reader.save(spec, [other])
    reader.save_offers(spec, Offers())
    assert reader.load(spec) == store.load(spec) == [TOOL]
    assert store.load_offers(spec) is None
