"""Errors of starting up that every command shares."""

from __future__ import annotations


class StartFailed(Exception):
    """The command cannot start for a reason outside its input (a busy port): exit 1, one line."""
