"""A live session is ready when it is built: the analysis's engines (lip-sync profile, pitch,
motion; a good part of a second of imports and loading) exist before `start`, so a played
file starts at the first read instead of after them, and the first frames do not stall."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np

from audio.calibration import default_profile_path, load_profile
from pipeline.live import LiveSession
from tests.written_audio import RATE, WrittenAudio


class StartedOnce(WrittenAudio):
    """A source that starts only when asked (as FilePlayback(start=False)); counts the asks."""

    def __init__(self) -> None:
        super().__init__(seconds=2.0)
        self.state = "closed"
        self.starts = 0
        self.started = threading.Event()

    def start(self) -> None:
        self.starts += 1
        self.state = "running"
        self.started.set()


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.002)


def test_the_engines_are_built_with_the_session_and_used_by_its_run():
    src = StartedOnce()
    session = LiveSession(
        src, "studio", size=(64, 36), fps=50, profile=load_profile(default_profile_path())
    )
    assert session.analysis.ready  # built by the constructor, before any thread runs
    assert src.starts == 0
    session.start()
    try:
        assert src.started.wait(30)
        wait_for(lambda: not session.analysis.ready)  # taken by the run, not built again
        src.ring.write(np.zeros(RATE // 5, np.float32))
        wait_for(lambda: session.hops > 0)
        assert src.starts == 1 and session.error is None
    finally:
        session.stop()


def test_engines_that_fail_ahead_are_reported_by_the_run():
    src = StartedOnce()
    broken = SimpleNamespace(sample_rate="not a rate")  # a profile whose rate is no number
    session = LiveSession(src, "studio", size=(64, 36), fps=50, profile=broken)
    assert not session.analysis.ready
    session.start()
    try:
        wait_for(lambda: session.error is not None)
        assert "audio analysis failed" in session.error and "not a rate" in session.error
        assert src.starts == 0  # never started: nothing could hear it
    finally:
        session.stop()
