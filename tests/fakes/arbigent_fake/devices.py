"""How the fake `arbigent` picks its device, as each version does (docs/arbigent-cli-facts.md).

The connected devices are FAKE_ARBIGENT_DEVICES (comma-separated ids; default one, emulator-5554;
FAKE_ARBIGENT_NO_DEVICE=1 means none).
- 0.77.0 and 0.81.x: `--os=ios` with several devices needs `--ios-real-device-id` (else "Multiple
  connected iPhones found ... Candidates: <masked ids>", a JVM exception); any other OS takes the
  first device; none is "No available device found".
- newer builds (read from DeviceIdOption.kt and DeviceSelection.kt): `--device-id`, else
  ARBIGENT_DEVICE_ID, else the settings key `device-id`; blank is an error; `--os=web` takes none;
  an exact match or an error listing the available ids; without one, exactly one device, several
  being an error that lists them. A non-blank `ios-real-device-id` (flag or key) fails the run with
  a migration message, even with `--dry-run`; so does ARBIGENT_IOS_REAL_DEVICE_ID for `--os=ios`.
  Each of these is a CliktError: the message alone on stderr, exit 1.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn

LEGACY_MIGRATION = (
    "--ios-real-device-id (settings key `ios-real-device-id`) has been replaced by --device-id "
    "(settings key `device-id`), which selects the device for every OS. Move the UDID there and "
    "remove the old option or key."
)
OS_LABELS = {"android": "Android", "ios": "iOS", "web": "web"}


def connected() -> list[str]:
    if os.environ.get("FAKE_ARBIGENT_NO_DEVICE") == "1":
        return []
    return [d for d in os.environ.get("FAKE_ARBIGENT_DEVICES", "emulator-5554").split(",") if d]


def refuse_legacy(settings: dict[str, Any], fail: Callable[[str], NoReturn]) -> None:
    """The newer CLI's check of the superseded option, whatever its source."""
    if str(settings.get("ios-real-device-id") or "").strip():
        fail(LEGACY_MIGRATION)


def choose_old(settings: dict[str, Any], exception: Callable[[str, str], NoReturn]) -> str:
    devices = connected()
    os_name = settings.get("os", "android")
    wanted = str(settings.get("ios-real-device-id") or os.environ.get("ARBIGENT_IOS_REAL_DEVICE_ID") or "").strip()
    if os_name == "ios" and wanted:
        devices = [d for d in devices if d == wanted]
    elif os_name == "ios" and len(devices) > 1:
        exception(
            "java.lang.IllegalArgumentException",
            "Multiple connected iPhones found. Set --ios-real-device-id (or ARBIGENT_IOS_REAL_DEVICE_ID) to choose "
            "one. Candidates: " + ", ".join(d[:8] + "…" for d in devices),
        )
    if not devices:
        exception("java.lang.IllegalArgumentException", "No available device found")
    return devices[0]


def choose_new(settings: dict[str, Any], source: str | None, fail: Callable[[str], NoReturn]) -> tuple[str, str]:
    """(the device, why it was chosen); `source` says where `device-id` came from, if anywhere."""
    os_name = settings.get("os", "android")
    label = OS_LABELS[os_name]
    legacy_env = os.environ.get("ARBIGENT_IOS_REAL_DEVICE_ID", "").strip()
    if legacy_env and os_name == "ios":
        fail(
            "ARBIGENT_IOS_REAL_DEVICE_ID has been replaced by ARBIGENT_DEVICE_ID and is no longer read. "
            "Unset it and set ARBIGENT_DEVICE_ID instead."
        )
    requested = settings.get("device-id")
    devices = connected()
    available = "Available: " + (", ".join(devices) or "(none)")
    if requested is not None:
        if not requested.strip():
            fail(
                "--device-id must not be empty. Remove the option, unset ARBIGENT_DEVICE_ID, or delete the "
                "`device-id` settings key to let arbigent use the only connected device."
            )
        requested = requested.strip()
        if os_name == "web":
            fail(
                "--device-id is not supported for --os=web because the browser session has no device id.\n"
                f"Source: {source}"
            )
        if requested in devices:
            return requested, f"requested via {source}"
        shown = requested[:8] + "…" if os_name == "ios" else requested
        fail(
            f"No {label} device with the requested device id was found.\nRequested: {shown}\nSource: {source}\n"
            f"{available}\nPass --device-id with one of the ids above, or clear the current setting."
        )
    if len(devices) > 1:
        fail(
            f"Several {label} devices are connected, so arbigent will not guess which one to use.\n{available}\n"
            "Pass --device-id (or set ARBIGENT_DEVICE_ID) to choose one."
        )
    if not devices:
        fail(f"No available {label} device found.")
    return devices[0], "only connected device"
