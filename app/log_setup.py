"""Logging, set up once by the command line: `kagura -v ...` / `kagura live -v` (repeatable).

    configure(verbosity)    0: nothing is set up (Python's own last-resort handler prints
                            warnings and errors, as before); 1 (-v): INFO; 2+ (-vv): DEBUG
    reset()                 remove what configure() added (tests; a process runs one command)

Everything Kagura logs goes through `logging.getLogger(...)` in its module (the quality
ladder's rung changes on "kagura.quality", the display on "kagura.display", ...); only this
module adds a handler, on the root logger, to stderr, one line per record:
"LOGGER: message". Called again, it replaces its own handler and sets the new level, so a
command that wants INFO by default (`kagura bench live --headless`) can ask for it after the
CLI has set up what -v said.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["FORMAT", "configure", "level_for", "reset"]

FORMAT = "%(name)s: %(message)s"

_handler: logging.Handler | None = None


def level_for(verbosity: int) -> int:
    return logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 else logging.WARNING


def configure(verbosity: int) -> None:
    """Send log records at the level `verbosity` asks for to stderr (see the module doc)."""
    global _handler
    if verbosity <= 0 and _handler is None:
        return
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    # stderr looked up now (not at import): a test's captured stderr is the one written to
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(_handler)
    root.setLevel(level_for(verbosity))


def reset() -> None:
    global _handler
    if _handler is not None:
        logging.getLogger().removeHandler(_handler)
        logging.getLogger().setLevel(logging.WARNING)
        _handler = None
