"""Cursor's and VS Code's `envFile`: a dotenv file whose variables a backend starts with."""

from __future__ import annotations

from pathlib import Path

from agentify._common import json_input
from agentify.errors import ConfigError


def read_env_file(path: Path, where: str) -> dict[str, str]:
    """`KEY=value` lines (`export ` allowed, `#` comments, values optionally quoted).

    Raises:
        ConfigError: the file cannot be read, or a line is not `KEY=value` (named by its number, never its value).
    """
    try:
        text = json_input.read_bounded(path).decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{where} names {path}, which cannot be read ({exc.strerror}): fix the path") from None
    except json_input.TooLarge as exc:
        raise ConfigError(f"{where} names {path}, which {exc}: fix the path") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where} names {path}, which is not UTF-8 text: save it as UTF-8") from None
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.replace("_", "a").isalnum():
            raise ConfigError(f"{path} line {number} is not KEY=value ({where}): fix that line")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values
