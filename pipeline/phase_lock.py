"""The live frame thread's scheduler: frame starts phase-locked to the display's ticks.

    lock = PhaseLock(fps, now_ns=time.monotonic_ns)    # any clock: tests pass simulated time
    lock.start()                                        # the session starts: learning begins
    lock.set_display_timing(tick_ns, refresh_ns, release_delay)   # None: free-running timer
    start, target, late = lock.next_start_ns(now_ns, previous_target)
    lock.note_start(woke_ns, start)                     # after the thread woke for `start`
    lock.note_frame(started_ms, frame_ms)               # after the frame was handed on
    lock.release_delay_ns()                             # for JitterBuffer.follow

A frame starts at the display tick that will show it minus the lead, lead = max(this
percentile of the recent frame times, their LEAD_OUTLIERS_LEFT_OUT worst left out, +
`frame_margin_ns`, the presenter's own release delay if it has one) + the wake-up allowance:
the frame thread's own wake-up lateness (P99 of the recent start errors, as many worst left
out, at least START_MARGIN_NS), which delays the frame's pts and so its due time. P99, not
less: every frame that misses its tick is shown a refresh later, and the goal is the P99 of
audio-to-photon.
No thread, no sleep here: the frame loop (pipeline/live_frames.py) sleeps until the start this
returns; every time is passed in or read from the injected clock.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core.clock import NS_PER_S
from core.stats import percentile_sorted, summary

FRAME_PREDICT_Q = 99.0
# frames (2 s at 60 fps): the P99 of 120 is about its second-worst, as a longer window's is
# its few worst, but a burst of slow frames (a session's first second, the ladder's set-up)
# leaves the lead in 2 s instead of 5 (docs/BENCHMARKS.md, "The live lead's window")
FRAME_PREDICT_WINDOW = 120
# chosen on the H200 (docs/BENCHMARKS.md, "Live audio-to-photon on the H200"): a smaller
# margin missed the audio-to-photon P99 goal in some runs
FRAME_MARGIN_NS = 3_000_000
# The session's first frames are slow (cold caches, the first graph replays, the first idol of
# a fresh render process): frames started in its first FRAME_LEARN_AFTER_S are not learnt
# from, or their outliers would hold the lead high for a whole window (the lead's
# median and P99 per run: docs/BENCHMARKS.md, "Live path, headless, cuda"). Until
# FRAME_LEARN_MIN frames are learnt the predicted frame time is one frame period.
FRAME_LEARN_AFTER_S = 0.5
FRAME_LEARN_MIN = 10
START_MARGIN_NS = 1_000_000
START_ERRORS_KEPT = 300
# Both estimates leave out their three worst samples. A stall cannot be predicted, and covering
# it moves every frame of the next window later to save the frames that already missed; while
# few samples are learnt (after the start, after `forget`) the P99 is their maximum, so one
# stall set the lead for seconds (docs/BENCHMARKS.md, "The live lead's window"). On the H200 the
# machine stalls in short bursts of a few slow frames with no stage slow, and with only the
# worst left out each burst held the lead higher for the rest of the window ("The live lead's
# outliers, again"). Over a full window the P99 without the three worst lies between the
# fifth- and the fourth-worst frame: a slow spell longer than a burst is still covered.
LEAD_OUTLIERS_LEFT_OUT = 3


class PhaseLock:
    def __init__(self, fps: int, now_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.fps = int(fps)
        self.now_ns = now_ns
        # display timing (set_display_timing): (tick_ns, refresh_ns, release_delay) or None
        self.display: tuple[int, int, Callable[[], int] | None] | None = None
        self.frame_ms: deque[float] = deque(maxlen=FRAME_PREDICT_WINDOW)
        self.start_errors_ms: deque[float] = deque(maxlen=START_ERRORS_KEPT)  # start - planned
        self.lead_ms: float | None = None  # the last lead used
        self.frame_margin_ns = FRAME_MARGIN_NS  # added to the predicted frame time (the lead)
        self.started_at: float | None = None  # s on the clock: when the session started
        # what the lead is made of, settable for an A/B (`kagura bench live`, scripts/lead_replay.py)
        self.outliers_left_out = LEAD_OUTLIERS_LEFT_OUT  # worst samples no estimate uses
        self.learn_min = FRAME_LEARN_MIN  # frames learnt before they set the lead
        self.predict_q = FRAME_PREDICT_Q  # the percentile of the frame times the lead covers

    @property
    def locked(self) -> bool:
        return self.display is not None

    def start(self) -> float:
        """The session starts now: frames of the next FRAME_LEARN_AFTER_S are not learnt."""
        self.started_at = self.now_ns() / 1e9
        return self.started_at

    def forget(self) -> None:
        """Drop the frame times and start errors learnt so far: what slowed them has ended (the
        quality ladder's lower rungs were set up beside the first frames, pipeline/ladder/
        prepare.py), and their P99 would hold the lead high for FRAME_PREDICT_WINDOW frames.
        Learning goes on from the next frame; until FRAME_LEARN_MIN are learnt the lead is one
        frame period again."""
        self.frame_ms.clear()
        self.start_errors_ms.clear()

    @property
    def predict_window(self) -> int:
        """How many recent frame times the predicted frame time (their P99) is taken over."""
        return int(self.frame_ms.maxlen or 0)

    @predict_window.setter
    def predict_window(self, frames: int) -> None:
        if frames < FRAME_LEARN_MIN:
            raise ValueError(f"predict_window must be >= {FRAME_LEARN_MIN}, got {frames}")
        self.frame_ms = deque(self.frame_ms, maxlen=int(frames))

    def set_display_timing(
        self,
        tick_ns: int | None,
        refresh_ns: int = 0,
        release_delay_ns: Callable[[], int] | None = None,
    ) -> None:
        """Lock frame starts to the display's ticks; `tick_ns=None`: the free-running timer.

        `tick_ns`: the instant (on this lock's clock) of one display tick (when the presenter
        takes a frame from its jitter buffer), `refresh_ns` the interval between ticks; ticks
        are then assumed at tick_ns + n * refresh_ns (call again whenever a better instant is
        known — one attribute store, any thread). `release_delay_ns()`: the presenter's current
        pts -> release delay (JitterBuffer.target_delay_ns), read once per frame.

        Frame k then targets the tick nearest to the previous target + 1/fps and starts at
        that tick minus the lead: max(the predicted frame time — FRAME_PREDICT_Q percentile of
        the last FRAME_PREDICT_WINDOW tick -> publication times, the worst few left out, +
        `frame_margin_ns` —, release delay) + the wake-up allowance (`wake_ns`). The frame is
        then due (pts + release delay <= tick) and has arrived by the tick that shows it,
        instead of waiting up to one refresh after being due, as it does with a timer whose
        phase to the display is arbitrary.
        """
        if tick_ns is None:
            self.display = None
            return
        if refresh_ns <= 0:
            raise ValueError(f"refresh_ns must be positive, got {refresh_ns}")
        self.display = (int(tick_ns), int(refresh_ns), release_delay_ns)

    def learning(self, started_ms: float | None) -> bool:
        """Whether a frame started at `started_ms` (this clock, ms) is past the session's first
        FRAME_LEARN_AFTER_S, whose frame times and start errors are not learnt from."""
        if started_ms is None or self.started_at is None:
            return True
        return started_ms / 1000.0 >= self.started_at + FRAME_LEARN_AFTER_S

    def note_frame(self, started_ms: float | None, frame_ms: float) -> None:
        """A frame started at `started_ms` took `frame_ms` from its start to its hand-over."""
        if self.learning(started_ms):
            self.frame_ms.append(frame_ms)

    def note_start(self, woke_ns: int, start_ns: int) -> None:
        """The frame thread woke at `woke_ns` for a start planned at `start_ns`."""
        if self.learning(woke_ns / 1e6):
            self.start_errors_ms.append((woke_ns - start_ns) / 1e6)

    def _percentile_without_outliers(self, samples: deque[float], q: float) -> float:
        """The q-th percentile of `samples` less their `outliers_left_out` largest."""
        kept = sorted(samples)[: len(samples) - self.outliers_left_out]
        return percentile_sorted(kept, q)

    def wake_ns(self) -> int:
        """The wake-up allowance: P99 of the recent start errors (`outliers_left_out` worst left
        out), at least START_MARGIN_NS."""
        if len(self.start_errors_ms) < 10:
            return START_MARGIN_NS
        p99 = self._percentile_without_outliers(self.start_errors_ms, 99.0)
        return max(START_MARGIN_NS, int(p99 * 1e6))

    def predicted_frame_ns(self) -> int:
        """The frame time the lead covers: P99 (`predict_q`) of the recent tick -> publication
        times (`outliers_left_out` worst left out) + `frame_margin_ns`; one frame period until
        `learn_min` frames were learnt from."""
        if len(self.frame_ms) < self.learn_min:
            return NS_PER_S // self.fps
        covered = self._percentile_without_outliers(self.frame_ms, self.predict_q)
        return int(covered * 1e6) + int(self.frame_margin_ns)

    def lead_ns(self, release_delay: Callable[[], int] | None) -> int:
        lead = self.predicted_frame_ns()
        if release_delay is not None:
            lead = max(lead, int(release_delay()))
        return lead + self.wake_ns()

    def release_delay_ns(self) -> int:
        """For a presenter that follows the session (JitterBuffer.follow): the pts -> release
        delay that makes each phase-locked frame due at the tick it was started for — the lead
        without the wake-up allowance (a frame's pts is read after its thread woke), i.e. the
        predicted frame time."""
        return self.predicted_frame_ns()

    def next_start_ns(self, now: int, target: int | None) -> tuple[int, int, int]:
        """Phase-locked: (start instant, target tick, late) for the next frame after the one
        that targeted `target` (None: the first frame). `late` = 1 when a target tick had to be
        given up because its start time had passed."""
        tick, refresh, release_delay = self.display  # type: ignore[misc]
        lead = self.lead_ns(release_delay)
        self.lead_ms = lead / 1e6
        period = NS_PER_S / self.fps
        late = 0
        if target is not None:
            k = round((target + period - tick) / refresh)
            want = tick + k * refresh
            if want - lead >= now - refresh // 4:
                return want - lead, want, 0
            late = 1
        # the first frame, or behind: the first tick whose start is still ahead
        k = -((tick - now - lead) // refresh)  # ceil((now + lead - tick) / refresh)
        return tick + k * refresh - lead, tick + k * refresh, late

    def stats(self) -> dict[str, Any]:
        s = summary(self.start_errors_ms)
        return {
            "phase_locked": self.display is not None,
            "frame_lead_ms": None if self.lead_ms is None else round(self.lead_ms, 2),
            "start_error_ms": None if s is None else {"median": s["median"], "p99": s["p99"]},
        }
