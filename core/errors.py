"""Errors every package may raise for the user (the CLI turns them into one line and exit 2)."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad argument or input file, described in one line for the user."""
