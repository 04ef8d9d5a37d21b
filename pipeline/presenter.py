"""The presenter's jitter buffer (Qt-free; the display paths live in app/present/).

Frames arrive from the pipeline with `pts_ns` on the master (audio-sample) clock at an irregular
arrival time. At every display refresh the display path calls `tick(now_master_ns, refresh_ns)`
and gets the frame to put on screen (docs/ARCHITECTURE.md, "Real-time rules", 3):

* a frame is *due* when the master clock reaches `pts + target_delay`; a tick releases the
  NEWEST due frame (older due frames it supersedes are dropped late, never shown out of time);
* `target_delay` follows the measured arrival lateness (`arrival − pts`: pipeline latency plus
  jitter): a high percentile over a sliding window of recent arrivals, plus a margin, bounded to
  `[min_delay, max_delay]`, and slewed at a limited rate (the video timeline is stretched by at
  most `grow_rate` / `shrink_rate`, so playback never lurches);
* a frame whose release would come more than `max_late` after its due time is dropped late;
* when the next frame is due but has not arrived (underflow) the last frame is repeated;
* the buffer holds at most `capacity` frames; a push into a full buffer drops the oldest;
* everything is counted (`stats()`).

Because `target_delay` is measured from `pts`, it already contains the pipeline latency; the
audio-to-photon estimate is `input_latency + target_delay + one refresh` where `input_latency` is
the sound-to-pts latency of the capture device (a constant the caller knows) and the extra
refresh is the scan-out of a frame presented at a VSYNC tick. `pipeline_latency_ms` (median
lateness) and `jitter_allowance_ms` (target delay minus that) split it for the UI.

Thread safety: `push` (pipeline thread) and `tick` (UI / present thread) may run concurrently.
"""

from __future__ import annotations

import bisect
import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from core.stats import percentile_sorted

NS_PER_MS = 1_000_000


class HasPts(Protocol):
    @property
    def pts_ns(self) -> int: ...


F = TypeVar("F", bound=HasPts)


@dataclass(frozen=True, slots=True)
class PresenterStats:
    shown: int  # distinct frames released to the display
    dropped_late: int  # frames never shown: superseded, or later than `max_late`, or stale
    dropped_overflow: int  # frames pushed out of a full buffer (oldest first)
    repeated: int  # ticks that showed the last frame again because the next one was missing
    buffered: int  # frames waiting now
    target_delay_ms: float  # current pts -> release delay
    desired_delay_ms: float  # where target_delay is slewing to
    pipeline_latency_ms: float  # median measured lateness (arrival - pts) over the window
    lateness_p99_ms: float  # high percentile of measured lateness over the window
    jitter_allowance_ms: float  # target_delay - pipeline_latency
    error_p50_ms: float  # presentation error: release time - (pts + target_delay)
    error_p99_ms: float
    refresh_ms: float  # last refresh interval seen by `tick`
    audio_to_photon_ms: float  # input_latency + target_delay + one refresh

    def summary(self) -> str:
        return (
            f"shown {self.shown}, late {self.dropped_late}, overflow {self.dropped_overflow}, "
            f"repeated {self.repeated}; delay {self.target_delay_ms:.1f} ms "
            f"(pipeline {self.pipeline_latency_ms:.1f} + jitter {self.jitter_allowance_ms:.1f}); "
            f"error P50 {self.error_p50_ms:.2f} / P99 {self.error_p99_ms:.2f} ms; "
            f"audio-to-photon ~{self.audio_to_photon_ms:.1f} ms"
        )


class _Window:
    """The last `size` values, kept sorted as well, for cheap running percentiles."""

    def __init__(self, size: int):
        self.size = size
        self._fifo: collections.deque[int] = collections.deque()
        self.sorted: list[int] = []

    def add(self, value: int) -> None:
        if len(self._fifo) >= self.size:
            old = self._fifo.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        self._fifo.append(value)
        bisect.insort(self.sorted, value)

    def percentile(self, q: float) -> float:
        return percentile_sorted(self.sorted, q * 100.0)  # q in [0, 1]

    def __len__(self) -> int:
        return len(self._fifo)


class JitterBuffer(Generic[F]):
    """VSYNC-paced release of frames on the master clock with an adaptive delay.

    Parameters (all times in nanoseconds):
      capacity       most frames held; pushing into a full buffer drops the oldest (counted)
      initial_delay  target delay before any lateness has been measured
      min_delay / max_delay  bounds of the target delay
      margin         added to the lateness percentile
      percentile     which lateness percentile the delay covers (0.99: one frame in a hundred
                     may come late)
      window         how many recent arrivals the percentile looks at
      grow_rate / shrink_rate  slew limits: target delay changes by at most this many ns per
                     ns of master time (0.1 = the video runs at most 10 % slow while growing)
      max_late       a due frame is shown only if released within this of its due time; None:
                     one refresh interval (the interval passed to `tick`)
      input_latency  sound-to-pts latency of the source, for the audio-to-photon estimate
    """

    def __init__(
        self,
        *,
        capacity: int = 8,
        initial_delay_ns: int = 50 * NS_PER_MS,
        min_delay_ns: int = 5 * NS_PER_MS,
        max_delay_ns: int = 250 * NS_PER_MS,
        margin_ns: int = 3 * NS_PER_MS,
        percentile: float = 0.99,
        window: int = 120,
        grow_rate: float = 0.1,
        shrink_rate: float = 0.02,
        max_late_ns: int | None = None,
        input_latency_ns: int = 0,
        error_window: int = 600,
    ):
        if capacity < 1:
            raise ValueError("jitter buffer capacity must be at least 1")
        if not 0 < min_delay_ns <= max_delay_ns:
            raise ValueError("need 0 < min_delay_ns <= max_delay_ns")
        self.capacity = capacity
        self.min_delay_ns = min_delay_ns
        self.max_delay_ns = max_delay_ns
        self.margin_ns = margin_ns
        self.percentile = percentile
        self.grow_rate = grow_rate
        self.shrink_rate = shrink_rate
        self.max_late_ns = max_late_ns
        self.input_latency_ns = input_latency_ns

        self._lock = threading.Lock()
        self._frames: collections.deque[F] = collections.deque()
        self._lateness = _Window(window)
        self._errors = _Window(error_window)
        self._target = float(self._clamp(initial_delay_ns))
        self._desired = self._target
        self._follow: Callable[[], int] | None = None
        self._last_tick_ns: int | None = None
        self._refresh_ns = 0
        self._current: F | None = None
        self._period_ns = 0  # content frame period, from consecutive pts
        self._last_pushed_pts: int | None = None
        self.last_was_new = False  # whether the last tick released a new frame

        self.shown = 0
        self.dropped_late = 0
        self.dropped_overflow = 0
        self.repeated = 0

    # -- pipeline side ---------------------------------------------------------------------

    def push(self, frame: F, arrival_master_ns: int, learn: bool = True) -> None:
        """A frame arrived at `arrival_master_ns` (master clock).

        `learn=False`: queue it, but keep its lateness out of the delay estimate (start-up
        transients that say nothing about the steady state)."""
        pts = frame.pts_ns
        with self._lock:
            if learn:
                self._lateness.add(arrival_master_ns - pts)
                self._update_desired()
            if self._last_pushed_pts is not None and pts > self._last_pushed_pts:
                step = pts - self._last_pushed_pts
                # a running estimate of the content frame period (ignores gaps from drops)
                if self._period_ns == 0 or step < self._period_ns * 1.5:
                    self._period_ns = (
                        step if self._period_ns == 0 else (3 * self._period_ns + step) // 4
                    )
            if self._last_pushed_pts is None or pts > self._last_pushed_pts:
                self._last_pushed_pts = pts
            if (self._current is not None and pts <= self._current.pts_ns) or (
                self._frames and pts <= self._frames[-1].pts_ns
            ):
                self.dropped_late += 1  # stale or out of order: never show time going back
                return
            if len(self._frames) >= self.capacity:
                self._frames.popleft()
                self.dropped_overflow += 1
            self._frames.append(frame)

    # -- display side ----------------------------------------------------------------------

    def tick(self, now_master_ns: int, refresh_ns: int) -> F | None:
        """One display refresh at master time `now_master_ns`.

        Returns the frame to have on screen after this tick: a newly released frame
        (`last_was_new` is True), or the current one again (a normal hold while the next frame
        is not yet due, or a counted repeat when it is due and missing). None before the first
        frame is due.
        """
        with self._lock:
            self._refresh_ns = refresh_ns
            self._slew(now_master_ns)
            target = int(self._target)
            max_late = refresh_ns if self.max_late_ns is None else self.max_late_ns
            release: F | None = None
            while self._frames and self._frames[0].pts_ns + target <= now_master_ns:
                frame = self._frames.popleft()
                if release is not None:
                    self.dropped_late += 1  # superseded by a newer due frame
                release = frame
            if release is not None and now_master_ns - (release.pts_ns + target) > max_late:
                self.dropped_late += 1  # missed its slot by more than max_late
                release = None
            if release is not None:
                self._errors.add(now_master_ns - (release.pts_ns + target))
                self._current = release
                self.shown += 1
                self.last_was_new = True
                return release
            self.last_was_new = False
            cur = self._current
            if cur is not None and self._period_ns > 0:
                next_pts = cur.pts_ns + self._period_ns
                if next_pts + target <= now_master_ns:
                    self.repeated += 1  # the next frame is due and not here: underflow
            return cur

    # -- adaptation ------------------------------------------------------------------------

    def _clamp(self, value: float) -> float:
        return min(max(value, self.min_delay_ns), self.max_delay_ns)

    def _update_desired(self) -> None:
        self._desired = self._clamp(self._lateness.percentile(self.percentile) + self.margin_ns)

    def follow(self, delay_ns: Callable[[], int] | None) -> None:
        """Take the target delay from `delay_ns()` at every tick instead of from the measured
        lateness (None: back to adapting). For a phase-locked session
        (LiveSession.release_delay_ns): it starts every frame so that it arrives just before the
        tick it is meant for, so the right delay is the one that makes the frame due at that
        tick — not a percentile of arrival − pts, which also holds how stale the newest audio
        sample was and a margin on top. Applied at once, without slewing: the session's
        frames are already tied to ticks. The lateness is still measured for the stats."""
        with self._lock:
            self._follow = delay_ns
            if delay_ns is None and len(self._lateness):
                self._update_desired()  # adapt again from what was measured meanwhile

    def _slew(self, now: int) -> None:
        if self._follow is not None:
            self._desired = self._target = self._clamp(float(self._follow()))
            self._last_tick_ns = now
            return
        last, self._last_tick_ns = self._last_tick_ns, now
        if last is None or now <= last:
            return
        dt = now - last
        if self._desired > self._target:
            self._target = min(self._desired, self._target + dt * self.grow_rate)
        else:
            self._target = max(self._desired, self._target - dt * self.shrink_rate)

    # -- reporting -------------------------------------------------------------------------

    @property
    def target_delay_ns(self) -> int:
        return int(self._target)

    def __len__(self) -> int:
        with self._lock:
            return len(self._frames)

    def stats(self) -> PresenterStats:
        with self._lock:
            target_ms = self._target / NS_PER_MS
            pipeline_ms = self._lateness.percentile(0.5) / NS_PER_MS
            refresh_ms = self._refresh_ns / NS_PER_MS
            return PresenterStats(
                shown=self.shown,
                dropped_late=self.dropped_late,
                dropped_overflow=self.dropped_overflow,
                repeated=self.repeated,
                buffered=len(self._frames),
                target_delay_ms=target_ms,
                desired_delay_ms=self._desired / NS_PER_MS,
                pipeline_latency_ms=pipeline_ms,
                lateness_p99_ms=self._lateness.percentile(self.percentile) / NS_PER_MS,
                jitter_allowance_ms=target_ms - pipeline_ms,
                error_p50_ms=self._errors.percentile(0.5) / NS_PER_MS,
                error_p99_ms=self._errors.percentile(0.99) / NS_PER_MS,
                refresh_ms=refresh_ms,
                audio_to_photon_ms=self.input_latency_ns / NS_PER_MS + target_ms + refresh_ms,
            )
