"""Errors of starting up that every command shares, and finding one inside anyio's exception groups.

    ConfigError     the configuration cannot be used (the gateway: exit 2; the arbigent runner: exit 1)
    StartFailed     the command cannot start for a reason outside its input (a busy port): exit 1

anyio task groups wrap whatever their body raises in an `ExceptionGroup`; `first` finds an error
inside with the stdlib's `BaseExceptionGroup.subgroup`, however deeply it was wrapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

E = TypeVar("E", bound=BaseException)


class ConfigError(Exception):
    """The configuration cannot be used; the message names the field (or file) and the fix."""


class StartFailed(Exception):
    """The command cannot start for a reason outside its input (a busy port): exit 1, one line."""


def as_group(exc: BaseException) -> BaseExceptionGroup[BaseException]:
    """`exc` itself when it is a group, else a group of one, so `subgroup` and `split` apply to both."""
    return exc if isinstance(exc, BaseExceptionGroup) else BaseExceptionGroup("", [exc])


def first(exc: BaseException, kind: type[E] | tuple[type[E], ...]) -> E | None:
    """The first exception of `kind` in `exc` (depth first), or None."""
    return cast(E | None, first_where(exc, lambda e: isinstance(e, kind)))


def first_where(exc: BaseException, condition: Callable[[BaseException], bool]) -> BaseException | None:
    """The first leaf of `exc` that meets `condition` (depth first), or None."""
    found: BaseException | None = as_group(exc).subgroup(
        lambda e: not isinstance(e, BaseExceptionGroup) and condition(e)
    )
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found
