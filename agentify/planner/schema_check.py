"""Validating arguments against a backend's JSON schema without letting its regexes freeze the gateway.

jsonschema matches `pattern` and `patternProperties` with Python's `re`, which backtracks: a
backend's `^(a+)+$` against 29 characters of input held the event loop (every client) for 17 s,
doubling with each character. Here those keywords match with the `regex` module under one time
budget per validation (`BUDGET_SECONDS`); past it the arguments are refused as too long to check.
`unevaluatedProperties` looks at `patternProperties` through jsonschema's own helpers, so in a
schema that has both it is left to the backend, which validates its arguments anyway.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from contextvars import ContextVar
from functools import cache
from typing import Any

import regex
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for

BUDGET_SECONDS = 0.25
"""All the pattern matching of one validation; real schemas need microseconds."""

_deadline: ContextVar[float] = ContextVar("schema_check_deadline", default=0.0)


class Uncheckable(Exception):
    """A pattern of the schema did not finish within the budget, or is not a regular expression."""


def bounded_validator(schema: dict[str, Any]) -> Validator:
    """A validator for `schema` (its own draft) whose regex keywords run under the budget."""
    cls = _bounded(validator_for(schema), _mentions(schema, "patternProperties"))
    return cls(schema, format_checker=cls.FORMAT_CHECKER)  # type: ignore[no-any-return]


def first_error(validator: Validator, instance: Any, absent: Collection[str] = ()) -> ValidationError | None:
    """The most relevant error, or None; that a required property in `absent` is missing is no error.
    Raises Uncheckable, and jsonschema's SchemaError."""
    token = _deadline.set(time.monotonic() + BUDGET_SECONDS)
    missing = {f"{name!r} is a required property" for name in absent}
    try:
        errors = validator.iter_errors(instance)
        kept = (e for e in errors if not (e.validator == "required" and not e.path and e.message in missing))
        error: ValidationError | None = best_match(kept)
        return error
    finally:
        _deadline.reset(token)


def _search(pattern: str, text: str) -> bool:
    remaining = _deadline.get() - time.monotonic()
    too_slow = f"matching the pattern {_preview(pattern)} took too long to check (over {BUDGET_SECONDS:g} s)"
    if remaining <= 0:
        raise Uncheckable(too_slow)
    try:
        return regex.search(pattern, text, timeout=remaining) is not None
    except TimeoutError:
        raise Uncheckable(too_slow) from None
    except regex.error as exc:
        raise Uncheckable(f"its pattern {_preview(pattern)} is not a regular expression ({exc})") from None


@cache
def _bounded(cls: type[Validator], has_pattern_properties: bool) -> type[Validator]:
    original = cls.VALIDATORS

    # jsonschema calls keywords with its concrete validator (`descend` is not in its protocol).
    def pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not _search(pattern, instance):
            yield ValidationError(f"{_preview(instance)} does not match {pattern!r}")

    def pattern_properties(
        validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for key_pattern, subschema in patterns.items():
            for key, value in instance.items():
                if _search(key_pattern, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=key_pattern)

    def additional_properties(
        validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        patterns = list(schema.get("patternProperties", {}))
        if not patterns:  # no regex involved: jsonschema's own, with its messages
            yield from original["additionalProperties"](validator, allowed, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in patterns)]
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif not allowed and extras:
            names = ", ".join(_preview(e) for e in sorted(extras)[:5])
            yield ValidationError(f"{names} match no property name nor any of the patterns {sorted(patterns)!r}")

    def left_to_the_backend(*_: Any) -> Iterator[ValidationError]:
        return iter(())

    keywords: dict[str, Any] = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
    if has_pattern_properties and "unevaluatedProperties" in original:
        keywords["unevaluatedProperties"] = left_to_the_backend
    return extend(cls, keywords)  # type: ignore[no-untyped-call,no-any-return]


def _mentions(schema: Any, keyword: str) -> bool:
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _preview(text: str) -> str:
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text)} characters)"
