"""Which arbigent the runner starts, and which version it is, found without starting it.

The executable: `--arbigent-bin-path` (an installed `arbigent`, or a project's `arbigentw`), else
the `arbigentw` wrapper in the project file's folder (a project that pins its release may have no
`arbigent` on PATH at all), else `arbigent`, then `arbigent-cli`, on PATH.

The version decides which options the runner may emit (`options.py`). The CLI has no `--version`,
starting its JVM costs seconds, and starting a wrapper may download a release, so the version is
read from what the installation holds, once per runner start:
- `--arbigent-version` (or AGENTIFY_ARBIGENT_VERSION), when the user states it;
- a wrapper: `distributionVersion` in `arbigentw.properties` beside it (0.81.1 and later), or in
  `.arbigent/wrapper/arbigent-wrapper.properties` (0.81.0), else the release its `distributionUrl`
  names; with neither file, ARBIGENT_VERSION (the release the wrapper pins on its first run);
- a release or Homebrew install: `lib/arbigent-cli-<version>.jar` beside the `bin/` that holds the
  executable (symbolic links followed), else the jar or Homebrew Cellar directory its start script names.
A version that cannot be read gets the newest table; the caller says so once.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from agentify.arbigent.errors import StartupError
from agentify.arbigent.options import NEWEST, CliOptions, table_for

EXECUTABLES = ("arbigent", "arbigent-cli")
WRAPPER = "arbigentw"
WRAPPER_PROPERTIES = ("arbigentw.properties", ".arbigent/wrapper/arbigent-wrapper.properties")
INSTALL_HINT = (
    "Install it with `brew install takahirom/repo/arbigent`, or unpack a release from "
    "https://github.com/takahirom/arbigent/releases and pass --arbigent-bin-path <dir>/bin/arbigent "
    "(or add the project's ./arbigentw with `arbigent wrapper`)"
)
_SCRIPT_BYTES = 65536
# Versions are short: bounded repeats keep a search over a long line linear.
_JAR = re.compile(r"arbigent-cli-(\d[\w.+-]{0,63}?)\.jar")
_CELLAR = re.compile(r"/Cellar/arbigent/(\d[^/\s\"']*)/")
_ARCHIVE = re.compile(r"arbigent-(\d[\w.+-]{0,63}?)\.tar\.gz$")


@dataclass(frozen=True)
class Arbigent:
    """The CLI the runner uses."""

    path: Path
    version: str | None
    """None when it could not be read."""
    options: CliOptions
    wrapper: bool

    def describe(self) -> str:
        """One line for the start-up log, `doctor` and `list_backends` (through the MCP server info)."""
        what = "the project's arbigentw wrapper, pinning arbigent" if self.wrapper else "arbigent"
        if self.version is None:
            return f"{what} of unknown version, run with the options of {self.options.label} ({self.path})"
        return f"{what} {self.version} ({self.path})"


def find_arbigent(explicit: str | None, project_dir: Path, stated_version: str | None = None) -> Arbigent:
    """The executable and its version (see the module docstring).

    Raises:
        StartupError: the given path is missing or not executable, a wrapper cannot run, or nothing was found.
    """
    path = _executable(explicit, project_dir)
    wrapper = path.name == WRAPPER
    version = stated_version.strip() if stated_version and stated_version.strip() else None
    if version is None:
        version = _wrapper_version(path) if wrapper else _release_version(path)
    return Arbigent(path, version, table_for(version) or NEWEST, wrapper)


def _executable(explicit: str | None, project_dir: Path) -> Path:
    if explicit:
        path = Path(explicit).expanduser()
        if not path.exists():
            raise StartupError(f"--arbigent-bin-path {explicit}: no such file")
        if path.is_dir():
            raise StartupError(
                f"--arbigent-bin-path {explicit} is a directory; pass the executable, e.g. {path}/bin/arbigent"
            )
        if not os.access(path, os.X_OK):
            raise StartupError(f"--arbigent-bin-path {explicit} is not executable (chmod +x {explicit})")
        # A wrapper finds its properties beside itself, so only its folder is made absolute, not its links.
        return Path(os.path.abspath(path)) if path.name == WRAPPER else path.resolve()
    wrapper = project_dir / WRAPPER
    if wrapper.is_file():
        if not os.access(wrapper, os.X_OK):
            raise StartupError(f"the project's wrapper {wrapper} is not executable (chmod +x {wrapper})")
        return wrapper
    for name in EXECUTABLES:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise StartupError(
        f"the arbigent CLI was not found: looked for ./{WRAPPER} in {project_dir}, then "
        f"{' then '.join(EXECUTABLES)} on PATH. {INSTALL_HINT}"
    )


def _wrapper_version(path: Path) -> str | None:
    """The release the wrapper runs.

    Raises:
        StartupError: no properties file and no ARBIGENT_VERSION, so the wrapper would refuse every run.
    """
    for name in WRAPPER_PROPERTIES:
        properties = path.parent / name
        if properties.is_file():
            return _property(properties, "distributionVersion") or _archive_version(properties)
    pinned = os.environ.get("ARBIGENT_VERSION", "").strip()
    if pinned:
        return pinned
    raise StartupError(
        f"{path} has no {WRAPPER_PROPERTIES[0]} beside it, so it cannot run arbigent: create both with "
        f"`arbigent wrapper --version <version> --dir {path.parent}`, or set ARBIGENT_VERSION=<version> "
        "for the wrapper to pin that release on its first run"
    )


def _property(path: Path, key: str) -> str | None:
    """The last `key=value` of a properties file, as the wrapper script reads it."""
    try:
        text = _head(path)
    except OSError:
        return None
    values = re.findall(rf"^\s*{key}\s*=\s*(.*?)\s*$", text, re.MULTILINE)
    return values[-1] if values and values[-1] else None


def _archive_version(properties: Path) -> str | None:
    url = _property(properties, "distributionUrl")
    match = _ARCHIVE.search(url) if url else None
    return match.group(1) if match else None


def _release_version(path: Path) -> str | None:
    real = path.resolve()
    lib = real.parent.parent / "lib"
    jars = sorted(lib.glob("arbigent-cli-*.jar")) if lib.is_dir() else []
    for jar in jars:
        if match := _JAR.fullmatch(jar.name):
            return match.group(1)
    try:
        text = _head(real)
    except OSError:
        text = ""
    match = _JAR.search(text) or _CELLAR.search(text) or _CELLAR.search(str(real))
    return match.group(1) if match else None


def _head(path: Path) -> str:
    with open(path, "rb") as file:
        return file.read(_SCRIPT_BYTES).decode("utf-8", errors="replace")
