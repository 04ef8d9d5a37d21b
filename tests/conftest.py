"""Fixtures shared by several test modules (pytest finds them here; no module imports them)."""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator

import pytest

from tests.pulse import PulseServer

_server: PulseServer | None = None


@pytest.fixture(scope="session")
def pulse() -> Iterator[PulseServer]:
    """The session's PulseAudio server: started on first use, stopped when the session ends."""
    global _server
    if _server is None:
        server = PulseServer()
        try:
            server.start()
        except RuntimeError as exc:
            server.stop()
            pytest.fail(str(exc))
        _server = server
        atexit.register(_stop_server)
    if _server.sink_module() is None:
        _server.load_sink()
    yield _server
    _stop_server()


def _stop_server() -> None:
    global _server
    if _server is not None:
        with contextlib.suppress(Exception):
            _server.stop()
        _server = None
