"""The cache, manifest and token directories are private, and nothing there is written through a symlink."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import mcp_types as types
import pytest

from agentify._common.private_files import private_dir, read_private, write_private
from agentify.backends.manifest import ManifestStore
from agentify.backends.oauth import TokenFile
from agentify.config import BackendConfig

TOOL = types.Tool(name="echo", description="Echo", input_schema={"type": "object"})
OAUTH = BackendConfig(id="secure", url="http://127.0.0.1:1/mcp", auth={"type": "oauth"})


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """Another file of the user's, which a planted link points at."""
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


def test_a_missing_directory_is_created_private_and_an_open_one_is_tightened(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "b"
    private_dir(fresh)
    assert mode(fresh) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    write_private(shared, "f.json", b"{}")
    assert mode(shared) == 0o700 and mode(shared / "f.json") == 0o600
    assert read_private(shared, "f.json") == b"{}" and read_private(shared, "missing") is None


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cache").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        write_private(tmp_path / "cache", "f.json", b"{}")
    with pytest.raises(OSError, match="symbolic link"):
        read_private(tmp_path / "cache", "f.json")
    assert list(elsewhere.iterdir()) == []


def test_a_link_planted_as_the_file_is_replaced_never_followed(tmp_path: Path, victim: Path) -> None:
    directory = tmp_path / "d"
    private_dir(directory)
    (directory / "f.json").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        read_private(directory, "f.json")
    write_private(directory, "f.json", b"{}")
    assert victim.read_text() == "precious\n"
    assert not (directory / "f.json").is_symlink() and (directory / "f.json").read_bytes() == b"{}"


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_file_or_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    write_private(directory, "f.json", b"{}")
    os.chown(directory / "f.json", 4242, 4242)
    with pytest.raises(OSError, match="not a regular file of this user"):
        read_private(directory, "f.json")
    os.chown(directory, 4242, 4242)
    with pytest.raises(OSError, match="belongs to uid 4242"):
        write_private(directory, "g.json", b"{}")


def test_the_manifest_store_keeps_the_cache_private_and_follows_no_planted_link(tmp_path: Path, victim: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "manifests").mkdir(parents=True)
    cache.chmod(0o777)
    (cache / "manifests").chmod(0o777)
    store = ManifestStore(cache)
    spec = BackendConfig(id="a", command="node")
    path = store.path(spec)
    assert path is not None
    # Where a writer that names its temporary file by its pid would write it, and the file itself.
    path.with_suffix(f".{os.getpid()}.tmp").symlink_to(victim)
    store.save(spec, [TOOL])
    assert victim.read_text() == "precious\n"
    assert mode(cache) == 0o700 and mode(cache / "manifests") == 0o700 and mode(path) == 0o600
    assert store.load(spec) == [TOOL]


def test_the_token_file_follows_no_planted_link_and_keeps_its_directory_private(tmp_path: Path, victim: Path) -> None:
    store = TokenFile(OAUTH, tmp_path)
    directory = store.path.parent
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    store.path.with_suffix(f".{os.getpid()}.tmp").symlink_to(victim)
    store._write({"tokens": {"access_token": "AT-1"}})
    assert victim.read_text() == "precious\n"
    assert mode(directory) == 0o700 and mode(store.path) == 0o600
    assert json.loads(store.path.read_text()) == {"tokens": {"access_token": "AT-1"}}


@pytest.mark.anyio
async def test_the_token_file_tells_every_token_and_client_secret_once(tmp_path: Path) -> None:
    heard: list[set[str]] = []
    store = TokenFile(OAUTH, tmp_path, secrets=lambda values: heard.append(set(values)))
    store._write({"tokens": {"access_token": "AT-1", "refresh_token": "RT-1"}, "client": {"client_secret": "CS-1"}})
    assert store.has_tokens() and await store.get_tokens() is not None
    assert heard == [{"AT-1", "RT-1", "CS-1"}]
    # Tokens an earlier run stored are heard when first read.
    later: list[set[str]] = []
    TokenFile(OAUTH, tmp_path, secrets=lambda values: later.append(set(values))).has_tokens()
    assert later == [{"AT-1", "RT-1", "CS-1"}]
