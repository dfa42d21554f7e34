"""`--variables`: what Arbigent's VariableParser (0.77.0) reads, and the text from which it reads back a given map."""

from __future__ import annotations


class VariablesError(ValueError):
    """A `--variables` value the CLI's VariableParser would refuse; the message is the CLI's."""


def parse_variables(text: str) -> dict[str, str]:
    """What Arbigent's VariableParser (0.77.0) reads from `--variables=<text>`.

    Pairs split on `,` outside quotes (a quote opens anywhere in a pair); `key=value` with both
    sides trimmed; a value wrapped in matching `"` or `'` loses them; a value that starts with a
    quote but does not end with it is refused, and so is a key that is not a letter or `_`
    followed by letters, digits or `_`.

    Raises:
        VariablesError: with the CLI's message.
    """
    if not text.strip():
        return {}
    pairs: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in text:
        if quote is None and char in "\"'":
            quote = char
        elif char == quote:
            quote = None
        elif char == "," and quote is None:
            if current:
                pairs.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        pairs.append("".join(current))
    result: dict[str, str] = {}
    for pair in (p for p in pairs if p.strip()):
        key, sep, value = pair.partition("=")
        if not sep:
            raise VariablesError(f"Invalid variable format: '{pair}'. Expected 'key=value'")
        key, value = key.strip(), value.strip()
        if len(value) >= 2:
            if value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            elif value[0] in "\"'":
                raise VariablesError(f"Unmatched quote in value for key '{key}'")
        if not valid_variable_name(key):
            raise VariablesError(
                f"Invalid variable name: '{key}'. Variable names must start with a letter or underscore and "
                "contain only letters, numbers, and underscores."
            )
        result[key] = value
    return result


def valid_variable_name(name: str) -> bool:
    """Kotlin's `isLetter`/`isLetterOrDigit` as the CLI uses them: Unicode letters, decimal digits, `_`."""
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return False
    return all(c.isalpha() or c.isdecimal() or c == "_" for c in name)


def encode_variables(variables: dict[str, str]) -> str:
    """The `--variables` text from which `parse_variables` reads back exactly `variables`.

    Each value is written bare, in `"..."` or in `'...'`, whichever reads back alone and leaves no
    quote open; a value only the parser's end of input can close (`a'b,"c`) may be the last pair.

    Raises:
        VariablesError: a key the CLI refuses, or values no quoting can carry through its parser.
    """
    pairs: list[str] = []
    last: str | None = None
    for key, value in variables.items():
        if not valid_variable_name(key):
            raise VariablesError(
                f"Invalid variable name: '{key}'. Variable names must start with a letter or underscore and "
                "contain only letters, numbers, and underscores."
            )
        candidates = [f"{key}={v}" for v in (value, f'"{value}"', f"'{value}'")]
        readable = [pair for pair in candidates if _reads_back(pair, key, value)]
        closed = [pair for pair in readable if _closes_its_quotes(pair)]
        if closed:
            pairs.append(closed[0])
        elif readable and last is None:
            last = readable[0]
        else:
            raise VariablesError(f"the value of variable '{key}' cannot be passed to arbigent: {value!r}")
    return ",".join(pairs + ([last] if last else []))


def _closes_its_quotes(pair: str) -> bool:
    """True when the parser leaves `pair` outside quotes, so the pair after it is read on its own."""
    quote: str | None = None
    for char in pair:
        if quote is None and char in "\"'":
            quote = char
        elif char == quote:
            quote = None
    return quote is None


def _reads_back(pair: str, key: str, value: str) -> bool:
    try:
        return parse_variables(pair) == {key: value}
    except VariablesError:
        return False
