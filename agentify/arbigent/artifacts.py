"""What a run left on disk, kept per run and offered as MCP resources `arbigent://runs/<run-id>/...`.

Arbigent overwrites `arbigent-result/result.yml` and `report.html` on every run, so both are
copied, right after the run, into a private directory of this runner process (mode 0700, removed
when it exits); the last `KEEP_RUNS` runs are kept. Screenshots have one file per step
(`screenshots/<step id>.png`) and are not overwritten, so they are served from where Arbigent wrote
them, but only those that the run's result.yml lists and that lie inside its
`arbigent-result/screenshots/` (a result.yml cannot make the runner serve another file).

On failure, the last screenshot of each failed scenario is attached to the result as an image,
while the images stay within `MAX_IMAGE_BYTES` in total (so a result passes a gateway's default
one-million-character limit whole); a screenshot over the budget is named, with its resource URI,
instead of attached. Pure Python has no fast PNG decoder, so screenshots are not downscaled.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentify.arbigent.yamlfile import YamlFileError, parse_yaml, read_text_file

URI_PREFIX = "arbigent://runs/"
KEEP_RUNS = 20
MAX_IMAGE_BYTES = 600_000
"""Raw bytes of all images attached to one result (about 800,000 characters in base64)."""
MAX_IMAGES = 4
MAX_RESULT_FILE_BYTES = 64 * 1024 * 1024
MAX_READ_BYTES = 32 * 1024 * 1024
MIME_TYPES = {
    ".yml": "application/yaml",
    ".html": "text/html",
    ".png": "image/png",
    ".webp": "image/webp",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
}
IMAGE_SUFFIXES = (".png", ".webp", ".jpg", ".jpeg")


class ArtifactError(Exception):
    """A resource that does not exist or cannot be read; the message names it."""


@dataclass(frozen=True)
class ScenarioResult:
    id: str
    success: bool


@dataclass(frozen=True)
class ResultFile:
    """What the runner reads from result.yml."""

    scenarios: list[ScenarioResult] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)
    """Every step's screenshot, in order, only those inside the result's screenshots directory."""
    last_screenshot: dict[str, Path] = field(default_factory=dict)
    """Per scenario id: the screenshot of its last step (of its last attempt)."""


def read_result_file(path: Path) -> ResultFile:
    """Reads result.yml (`scenarios: [{id, isSuccess, histories: [{agentResults: [{steps: [...]}]}]}]`).

    An unreadable or malformed file gives an empty result: the run's exit code still decides.
    """
    try:
        data = parse_yaml(read_text_file(path, what="result file", limit=MAX_RESULT_FILE_BYTES), str(path))
    except (YamlFileError, yaml.YAMLError):
        return ResultFile()
    items = data.get("scenarios") if isinstance(data, dict) else None
    allowed = os.path.realpath(path.parent / "screenshots") + os.sep
    result = ResultFile()
    seen: set[Path] = set()
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(scenario_id := item.get("id", item.get("scenarioId")), str):
            continue
        result.scenarios.append(ScenarioResult(scenario_id, item.get("isSuccess") is True))
        for raw in _step_screenshots(item):
            shot = Path(os.path.realpath(path.parent / raw))
            if str(shot).startswith(allowed) and shot.suffix.lower() in IMAGE_SUFFIXES:
                if shot not in seen:
                    seen.add(shot)
                    result.screenshots.append(shot)
                result.last_screenshot[scenario_id] = shot
    return result


def _step_screenshots(item: dict[str, Any]) -> Iterator[str]:
    for history in _dicts(item.get("histories")):
        for agent_result in _dicts(history.get("agentResults")):
            for step in _dicts(agent_result.get("steps")):
                if isinstance(path := step.get("screenshotFilePath"), str) and path:
                    yield path


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    return (v for v in value if isinstance(v, dict)) if isinstance(value, list) else iter(())


@dataclass(frozen=True)
class StoredRun:
    """One run's resources: name (`result.yml`, `report.html`, `screenshots/<file>`) to file."""

    run_id: str
    label: str
    files: dict[str, Path]

    def uri(self, name: str) -> str:
        return f"{URI_PREFIX}{self.run_id}/{name}"


@dataclass(frozen=True)
class Attachment:
    scenario_id: str
    uri: str
    mime_type: str
    data: bytes | None
    """None when the screenshot was not attached; `note` says why."""
    note: str | None = None


class ArtifactStore:
    """The runs of this runner process and their files (see the module docstring)."""

    def __init__(self, keep: int = KEEP_RUNS, parent: Path | None = None) -> None:
        self._keep = keep
        self._parent = parent
        """Where the private directory is made (default: the system's temporary directory)."""
        self._root: Path | None = None
        self._runs: OrderedDict[str, StoredRun] = OrderedDict()

    @staticmethod
    def new_run_id() -> str:
        return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)

    def keep(
        self, run_id: str, label: str, result_file: Path | None, report_file: Path | None, screenshots: list[Path]
    ) -> StoredRun:
        """Copies result.yml and report.html of a finished run; blocking (call it off the event loop)."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="agentify-arbigent-runs-", dir=self._parent))
        directory = self._root / run_id
        directory.mkdir(mode=0o700)
        files: dict[str, Path] = {}
        for name, source in (("result.yml", result_file), ("report.html", report_file)):
            if source is not None and _copy_bounded(source, directory / name):
                files[name] = directory / name
        for shot in screenshots:
            files.setdefault(f"screenshots/{shot.name}", shot)
        run = StoredRun(run_id, label, files)
        self._runs[run_id] = run
        while len(self._runs) > self._keep:
            _, old = self._runs.popitem(last=False)
            shutil.rmtree(self._root / old.run_id, ignore_errors=True)
        return run

    def runs(self) -> list[StoredRun]:
        """Newest first."""
        return list(reversed(self._runs.values()))

    def read(self, uri: str) -> tuple[bytes, str]:
        """The bytes and MIME type of a resource; blocking.

        Raises:
            ArtifactError: unknown URI, a file gone since the run, or one too big to send.
        """
        run_id, _, name = uri.removeprefix(URI_PREFIX).partition("/")
        run = self._runs.get(run_id) if uri.startswith(URI_PREFIX) else None
        path = run.files.get(name) if run is not None else None
        if path is None:
            raise ArtifactError(f"no such resource: {uri} (this runner keeps the files of its last {self._keep} runs)")
        try:
            with open(path, "rb") as file:
                data = file.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise ArtifactError(f"{uri} cannot be read: {exc.strerror or exc}") from None
        if len(data) > MAX_READ_BYTES:
            raise ArtifactError(f"{uri} is larger than {MAX_READ_BYTES:,} bytes; open {path} instead")
        return data, mime_type(name)

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


def attachments(run: StoredRun, failed: list[tuple[str, Path]], budget: int = MAX_IMAGE_BYTES) -> list[Attachment]:
    """The last screenshot of each failed scenario, as images while they fit `budget`; blocking."""
    found = []
    for index, (scenario_id, shot) in enumerate(failed):
        uri = run.uri(f"screenshots/{shot.name}")
        mime = mime_type(shot.name)
        try:
            size = shot.stat().st_size
        except OSError as exc:
            found.append(Attachment(scenario_id, uri, mime, None, f"it cannot be read ({exc.strerror})"))
            continue
        if index >= MAX_IMAGES:
            found.append(Attachment(scenario_id, uri, mime, None, f"only {MAX_IMAGES} screenshots are attached"))
        elif size > budget:
            note = f"{size:,} bytes is over the {budget:,} bytes left for images in this result"
            found.append(Attachment(scenario_id, uri, mime, None, note))
        else:
            try:
                data = shot.read_bytes()[: budget + 1]
            except OSError as exc:
                found.append(Attachment(scenario_id, uri, mime, None, f"it cannot be read ({exc.strerror})"))
                continue
            budget -= len(data)
            found.append(Attachment(scenario_id, uri, mime, data))
    return found


def mime_type(name: str) -> str:
    return MIME_TYPES.get(Path(name).suffix.lower(), "application/octet-stream")


def _copy_bounded(source: Path, target: Path) -> bool:
    try:
        if not source.is_file() or source.stat().st_size > MAX_RESULT_FILE_BYTES:
            return False
        shutil.copyfile(source, target)
    except OSError:
        return False
    return True
