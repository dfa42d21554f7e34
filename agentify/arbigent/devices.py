"""The device a run uses: the flag that names it for each CLI version, and the CLI's answer when it
could not choose one.

Builds after 0.81.1 take `--device-id` for every OS but the web (the flag beats ARBIGENT_DEVICE_ID,
which beats the settings key `device-id`); without one, exactly one usable device must be
connected, and several is an error that lists them (`Available: a, b`). 0.77.0 and 0.81.x can name
only an iPhone (`--ios-real-device-id`, exception "Multiple connected iPhones found ... Candidates:
..." without it); for Android they take the first device found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agentify.arbigent.options import CliOptions

MAX_DEVICE_ID = 200


class DeviceChoiceError(ValueError):
    """The device cannot be named to this CLI; the message says what to do instead."""


def check_device_id(device_id: str) -> str:
    """`device_id` without surrounding spaces.

    Raises:
        DeviceChoiceError: empty, too long, or holding spaces or control characters (no device id does).
    """
    value = device_id.strip()
    if not value or len(value) > MAX_DEVICE_ID or any(c.isspace() or not c.isprintable() for c in value):
        raise DeviceChoiceError(
            f"deviceId must be a device's id as `adb devices` or `xcrun simctl list` shows it (1-{MAX_DEVICE_ID} "
            f"characters, no spaces), not {device_id[:80]!r}"
        )
    return value


def device_flag(cli: CliOptions, os_name: str, device_id: str) -> str:
    """The option that runs on `device_id` for `--os=<os_name>`.

    Raises:
        DeviceChoiceError: this CLI cannot name a device for that OS.
    """
    if os_name == "web":
        raise DeviceChoiceError(
            "a device cannot be chosen for --os=web: a browser session has no device id; leave deviceId out"
        )
    if cli.device_option == "device-id":
        return f"--device-id={device_id}"
    if os_name == "ios":
        return f"--ios-real-device-id={device_id}"
    raise DeviceChoiceError(
        f"arbigent {cli.label} cannot choose the device for --os={os_name}: it can name only an iPhone "
        "(--ios-real-device-id) and takes the first device it finds otherwise. Upgrade to a build with "
        "--device-id (after 0.81.1), or connect only the device to test and leave deviceId out"
    )


@dataclass(frozen=True)
class DeviceRefusal:
    """The CLI stopped because it could not tell which device to use."""

    kind: Literal["several", "not_found"]
    devices: tuple[str, ...]
    """The ids it listed (an iPhone's UDID may be shown shortened)."""
    requested: str | None = None

    def verdict(self) -> str:
        listed = ", ".join(self.devices) or "none"
        if self.kind == "several":
            return (
                f"several devices are connected and arbigent will not guess which one to use ({listed}). Call the "
                "tool again with deviceId set to one of them, or start the runner with --device-id"
            )
        return (
            f"no connected device has the id {self.requested or 'that was asked for'} (connected: {listed}). "
            "Pass one of the connected ids as deviceId"
        )


# The platform word between is short; a bounded gap keeps a search over a long stderr line linear.
_SEVERAL = re.compile(r"Several .{0,40}? devices are connected|Multiple connected iPhones found")
_NOT_FOUND = re.compile(r"No .{0,40}? device with the requested device id was found")
_LISTED = re.compile(r"(?:^|\s)(?:Available|Candidates): (.*)$")
_REQUESTED = re.compile(r"^Requested: (.*)$")


def device_refusal(stderr: str) -> DeviceRefusal | None:
    """What the CLI's stderr says about a device it could not choose, if that is why it stopped."""
    several = _SEVERAL.search(stderr) is not None
    if not several and _NOT_FOUND.search(stderr) is None:
        return None
    devices: tuple[str, ...] = ()
    requested = None
    for line in (line.strip() for line in stderr.splitlines()):
        if (listed := _LISTED.search(line)) is not None and not devices:
            devices = tuple(_device_id(entry) for entry in listed.group(1).split(", ") if entry != "(none)")
        elif (asked := _REQUESTED.match(line)) is not None:
            requested = asked.group(1)
    return DeviceRefusal("several" if several else "not_found", devices, requested)


def _device_id(entry: str) -> str:
    """`Pixel 8 (emulator-5554)` -> `emulator-5554`: the CLI shows a named device as `name (id)`."""
    entry = entry.strip()
    if entry.endswith(")") and " (" in entry:
        return entry[entry.rindex(" (") + 2 : -1]
    return entry
