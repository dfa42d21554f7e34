"""The wheel as a user installs it: built from the checkout, installed in a clean virtual environment
(not editable, no access to the checkout's sources) and run from there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import REPO, fs_backend, write_config
from tests.console.conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.wheel]
CONSOLE_TOKEN = "wheel-console-token-0123456789"


def _clean_env(tmp: Path) -> dict[str, str]:
    drop = ("OPENAI_", "AGENTIFY_", "PYTHON", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)} | {"AGENTIFY_CACHE_DIR": str(tmp / "cache")}


def _run(*args: str | Path, tmp: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs in `tmp`, outside the checkout, so `python -c` cannot import the sources from the current folder."""
    return subprocess.run(
        [str(a) for a in args],
        env=_clean_env(tmp),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The `bin` folder of a fresh venv with the wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    built = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "dist", REPO, tmp=tmp)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("mcp_agentify-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentify/debug_ui/index.html" in names and any(n.endswith("/licenses/LICENSE") for n in names)
    venv = _run(sys.executable, "-m", "venv", tmp / "venv", tmp=tmp)
    assert venv.returncode == 0, venv.stderr
    bin_dir = tmp / "venv" / "bin"
    # --no-compile: byte-compiling some 60 packages is most of the install's CPU, and a user's first run does it anyway
    pip = (bin_dir / "python", "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check")
    install = _run(*pip, f"{wheel}[console]", tmp=tmp, timeout=1200)
    assert install.returncode == 0, install.stderr
    yield bin_dir


def test_the_installed_command_and_module_answer_their_version(installed: Path, tmp_path: Path) -> None:
    where = _run(installed / "python", "-c", "import agentify; print(agentify.__file__)", tmp=tmp_path)
    assert where.stdout.startswith(str(installed.parent)), where.stdout  # the installed copy, not the checkout
    for command in ([installed / "agentify"], [installed / "python", "-m", "agentify"]):
        done = _run(*command, "--version", tmp=tmp_path)
        assert (done.returncode, done.stdout) == (0, "agentify 0.1.0\n"), done.stderr


def test_the_installed_doctor_checks_the_filesystem_server(installed: Path, tmp_path: Path, workspace: Path) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)])
    done = _run(installed / "agentify", "doctor", "--config", config, tmp=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read_text_file" in done.stdout and "all good" in done.stdout


@pytest.mark.anyio
async def test_the_installed_gateway_serves_the_official_client_and_the_console_page(
    installed: Path, tmp_path: Path, workspace: Path
) -> None:
    config = write_config(tmp_path, [fs_backend(workspace)], expose=["search"])
    port = free_port()
    params = StdioServerParameters(
        command=str(installed / "agentify"),
        args=["serve", "--config", str(config), "--debug-port", str(port)],
        env=_clean_env(tmp_path) | {"AGENTIFY_DEBUG_TOKEN": CONSOLE_TOKEN},
        cwd=tmp_path,
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                tools = await session.list_tools()
                found = await session.call_tool("search_tools", {"query": "read a text file"})
                page = await _console_page(port)
    assert sorted(tool.name for tool in tools.tools) == ["call_tool", "search_tools"]
    assert "fs__read_text_file" in json.dumps(found.structured_content)
    assert "Run a task" in page  # debug_ui/ came with the wheel


async def _console_page(port: int) -> str:
    """The console's page, once it listens (it starts beside the gateway, not before it answers)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {CONSOLE_TOKEN}"}) as client:
        while True:
            try:
                response = await client.get(f"http://127.0.0.1:{port}/")
            except httpx2.ConnectError:
                await anyio.sleep(0.1)
                continue
            assert response.status_code == 200, response.text
            return response.text
