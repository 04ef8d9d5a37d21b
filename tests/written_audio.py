"""A live audio source the test writes into, as a sound card's callback would (tests of the
live analysis: tests/test_live_backlog.py, tests/test_live_start.py)."""

from __future__ import annotations

import threading

from audio.ringbuffer import RingBuffer, RingSource

RATE = 48_000  # not the profile's rate: the resampler's delay is in the clock mapping too


class WrittenAudio(RingSource):
    """Mono audio the test writes; each write is published in one step."""

    def __init__(self, seconds: float = 10.0) -> None:
        n = int(seconds * RATE)
        self.sample_rate = RATE
        self.ring = RingBuffer(n, 1, max_block=n)
        self.state = "running"
        self._stop = threading.Event()
        self._thread = None
        self.read_from = threading.Event()  # set when the analysis has its reader

    def reader(self, position=None):
        r = super().reader(position)
        self.read_from.set()
        return r

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.state = "closed"
