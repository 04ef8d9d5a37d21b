"""Fixtures shared by several test modules (pytest finds them here; no module imports them)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator

import pytest

from tests.pulse import PulseServer

# the renders the tests start never reach a `kagura serve` the machine may be running: a socket
# no server has (tests/test_serve.py starts its own servers)
os.environ["KAGURA_SERVE_SOCKET"] = os.path.join(
    tempfile.gettempdir(), f"kagura-tests-{os.getpid()}-no-server.sock"
)

# A suite started as a background job of a non-interactive shell (`bash .ci/run &`, nohup)
# inherits SIGINT ignored, and so would every process it starts: the tests that press Ctrl+C
# at a render would see it ignored, as a user's Ctrl+C never is. A Python handler here is reset
# to the default in each child at exec, where Python turns Ctrl+C into KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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
