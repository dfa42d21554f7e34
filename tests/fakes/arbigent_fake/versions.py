"""What each version of the fake `arbigent` accepts, chosen by FAKE_ARBIGENT_VERSION (default: NEWEST).

- 0.77.0 (and 0.78-0.80): the options and commands read from the 0.77.0 source.
- 0.81.0, 0.81.1: the same options, and the `wrapper` command (0.81.0 writes its properties to
  `.arbigent/wrapper/arbigent-wrapper.properties`, 0.81.1 to `arbigentw.properties`).
- a build from main after 0.81.1 (`0.81.1-N-g<commit>`, NEWEST) or a later release: `--device-id`
  replaces `--ios-real-device-id` (kept hidden, and refused), `--ai-type anthropic` and the `--jev-*`
  options are new, and so is `sort`.
This module imports nothing of the fake, so the contract test can load it on its own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

NEWEST = "0.81.1-20-g24b7c06"

OPENAI_GEMINI_AZURE = ["openai-endpoint", "openai-model-name", "openai-api-key", "gemini-endpoint"]
OPENAI_GEMINI_AZURE += ["gemini-model-name", "gemini-api-key", "azure-openai-endpoint", "azure-openai-api-version"]
OPENAI_GEMINI_AZURE += ["azure-openai-model-name", "azure-openai-api-key"]
ANTHROPIC = ["anthropic-endpoint", "anthropic-model-name", "anthropic-api-key"]
JEV = ["jev-api-key", "jev-base-url", "jev-model", "jev-mode", "jev-action-threshold", "jev-goal-threshold"]
COMMON = ["ai-api-logging", "os", "ios-xctest-apple-team-id", "ios-real-device-port", "log-level", "log-file"]
COMMON += ["working-directory"]
RUN_ONLY = ["project-file", "path", "variables", "scenario-ids", "tags", "dry-run", "shard"]
TASK_ONLY = ["max-step", "max-retry"]
OLD_COMMANDS = ("run", "scenarios", "tags", "graph", "instruction", "guide")


@dataclass(frozen=True)
class Version:
    name: str
    run_options: list[str]
    """The options `arbigent run --help` lists."""
    task_options: list[str]
    commands: tuple[str, ...]
    device_id: bool
    """Has `--device-id` (and refuses a leftover `--ios-real-device-id`)."""
    hidden: tuple[str, ...] = ()
    """Options accepted but not listed: only to refuse them with a migration message."""
    wrapper_properties: str = "arbigentw.properties"


def version(name: str | None = None) -> Version:
    name = name or os.environ.get("FAKE_ARBIGENT_VERSION") or NEWEST
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(?:-(\d+)-g)?", name)
    parts = tuple(int(p or 0) for p in match.groups()) if match else (99, 0, 0, 0)
    old_ai = ["ai-type", *OPENAI_GEMINI_AZURE]
    old_device = [*COMMON, "ios-real-device-id"]
    if parts < (0, 81, 0, 0):
        run, task = [*old_ai, *old_device, *RUN_ONLY], [*old_ai, *old_device, *TASK_ONLY]
        return Version(name, run, task, OLD_COMMANDS, device_id=False)
    if parts <= (0, 81, 1, 0):
        run, task = [*old_ai, *old_device, *RUN_ONLY], [*old_ai, *old_device, *TASK_ONLY]
        legacy = ".arbigent/wrapper/arbigent-wrapper.properties" if parts < (0, 81, 1, 0) else "arbigentw.properties"
        return Version(name, run, task, (*OLD_COMMANDS, "wrapper"), device_id=False, wrapper_properties=legacy)
    new_device = [*COMMON, "device-id", *ANTHROPIC, *JEV]
    run, task = [*old_ai, *new_device, *RUN_ONLY], [*old_ai, *new_device, *TASK_ONLY]
    commands = (*OLD_COMMANDS, "wrapper", "sort")
    return Version(name, run, task, commands, device_id=True, hidden=("ios-real-device-id",))
