"""The live display's feed: session output → jitter buffer, the same for the window and the
headless bench.

    jitter = live_jitter_buffer(fps)       the jitter buffer `kagura live` displays through
    pump = FramePump(session, jitter, warm_up_ns=WARM_UP_NS, name="kagura-ui-pump")
    pump.sinks.append(camera)              extra outputs fed off the UI thread (virtual camera)

The pump thread stamps each frame with its arrival on the master clock (`session.clock`) and
pushes it into the buffer; whoever owns the display ticks the buffer at each refresh
(app/ui/main_window.py on a QTimer, app/bench_live.py on a simulated VSYNC).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pipeline.presenter import JitterBuffer
from pipeline.queues import Closed

log = logging.getLogger("kagura.display")

# Frames of the first second are shown but not learnt from: start-up transients (a capture
# device handing over its backlog in one burst, first-call costs) would otherwise set the
# jitter buffer's delay to its maximum and keep it there for many seconds.
WARM_UP_NS = 1_000_000_000

MAX_DELAY_NS = 250_000_000
INITIAL_DELAY_NS = 40_000_000


def live_jitter_buffer(fps: int) -> JitterBuffer:
    """The buffer the live display releases frames from."""
    return JitterBuffer(
        # room for every frame the largest delay can hold, so a grown delay never overflows
        capacity=int(MAX_DELAY_NS * fps / 1e9) + 2,
        initial_delay_ns=INITIAL_DELAY_NS,
        max_delay_ns=MAX_DELAY_NS,
    )


class FramePump:
    """Session output queue → jitter buffer, on its own thread (arrival = master clock now)."""

    def __init__(
        self,
        session: Any,
        jitter: JitterBuffer,
        *,
        warm_up_ns: int = WARM_UP_NS,
        name: str = "kagura-pump",
    ) -> None:
        self.session, self.jitter, self.warm_up_ns = session, jitter, warm_up_ns
        self.sinks: list[Any] = []  # extra outputs, written on this thread
        self.first: int | None = None  # the first arrival (master clock ns)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        q = self.session.output
        while True:
            try:
                frame = q.get()
            except Closed:
                return
            now = self.session.clock.now_ns()
            self.first = now if self.first is None else self.first
            self.jitter.push(frame, now, learn=now - self.first >= self.warm_up_ns)
            for sink in list(self.sinks):
                try:
                    sink.write(frame)
                except Exception as exc:  # a camera that went away must not stop the preview
                    log.warning("output %s stopped: %s", getattr(sink, "name", sink), exc)
                    self.sinks.remove(sink)
