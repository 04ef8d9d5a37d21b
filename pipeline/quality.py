"""The quality ladder: lower the cost of a frame before dropping frames, restore it when there
is headroom (docs/ARCHITECTURE.md, "Real-time rules", 4).

    Rung(name, steps, latent, temporal, vsr_scale)      one setting of the costly knobs
    DEFAULT_LADDER                                       best (index 0) -> cheapest
    QosEvent(pts_ns, from_rung, to_rung, reason)         one change, as sent upstream
    QualityController(budget_ms, ladder=DEFAULT_LADDER, *, window=60, percentile=99.0,
                      min_samples=30, up_ratio=0.75, up_frames=90, probation=None,
                      max_up_frames=None)
        feed(gpu_ms, pts_ns) -> QosEvent | None          one frame's GPU time
        rung / level                                     the current Rung / its index
        events                                           every change so far
        force(level, pts_ns, reason), reset_window()

Rules:
- down: once the window holds at least `min_samples` frames measured *at the current rung*
  and their P99 exceeds the budget, step down one rung (the window is cleared: the next
  decision is made on the new rung's own timings);
- up (hysteresis): after `up_frames` consecutive frames with the window's P99 below
  `up_ratio` x budget, step up one rung;
- no oscillation: stepping down within `probation` frames (default `up_frames`) of stepping up
  means the climb failed: the hold before the next climb from that rung doubles (up to
  `max_up_frames`, default 16 x up_frames). A rung whose better neighbour does not fit is
  therefore tried less and less often instead of flapping at a fixed period.
P99 here is the sample at rank floor(0.99 x (n - 1)) of the window (`core.stats.percentile_floor`,
a decision rule, not a reported figure), so one isolated spike in a 60-frame window does not move
it; two do.
Every change is appended to `events` and logged (logger "kagura.quality") with its reason.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from core.stats import percentile_floor

MAX_EVENTS_KEPT = 1000  # rung changes kept for the reports (their count goes on)


def keep_latest(items: list, item) -> None:
    """Append `item` to a list of rung changes, keeping the latest MAX_EVENTS_KEPT: bounded, so
    an oscillating ladder cannot grow a long session's memory."""
    items.append(item)
    if len(items) > MAX_EVENTS_KEPT:
        del items[: len(items) - MAX_EVENTS_KEPT]


log = logging.getLogger("kagura.quality")


@dataclass(frozen=True)
class Rung:
    name: str
    steps: int  # diffusion steps
    latent: tuple[int, int]  # (width, height) of the image the diffusion works on
    temporal: bool  # temporal refinement on/off
    vsr_scale: int  # super-resolution factor


DEFAULT_LADDER: tuple[Rung, ...] = (
    Rung("2 steps 640x360 temporal vsr x4", 2, (640, 360), True, 4),
    Rung("1 step 640x360 temporal vsr x4", 1, (640, 360), True, 4),
    Rung("1 step 512x288 temporal vsr x4", 1, (512, 288), True, 4),
    Rung("1 step 512x288 vsr x4", 1, (512, 288), False, 4),
    Rung("1 step 384x216 vsr x4", 1, (384, 216), False, 4),
    Rung("1 step 384x216 vsr x3", 1, (384, 216), False, 3),
    Rung("1 step 384x216 vsr x2", 1, (384, 216), False, 2),
)


@dataclass(frozen=True)
class QosEvent:
    """A quality change, for the graph and the logs. Rungs are indices into the ladder."""

    pts_ns: int
    from_rung: int
    to_rung: int
    reason: str


class QualityController:
    def __init__(
        self,
        budget_ms: float,
        ladder: tuple[Rung, ...] = DEFAULT_LADDER,
        *,
        start: int = 0,
        window: int = 60,
        percentile: float = 99.0,
        min_samples: int = 30,
        up_ratio: float = 0.75,
        up_frames: int = 90,
        probation: int | None = None,
        max_up_frames: int | None = None,
    ):
        if budget_ms <= 0:
            raise ValueError(f"budget_ms must be positive, got {budget_ms}")
        if not ladder:
            raise ValueError("the ladder needs at least one rung")
        if not 0 <= start < len(ladder):
            raise ValueError(f"start must index the ladder (0..{len(ladder) - 1}), got {start}")
        if not 0 < up_ratio < 1:
            raise ValueError(f"up_ratio must be in (0, 1), got {up_ratio}")
        if not 1 <= min_samples <= window:
            raise ValueError("min_samples must be in 1..window")
        self.budget_ms = float(budget_ms)
        self.ladder = tuple(ladder)
        self.level = start
        self.percentile = float(percentile)
        self.min_samples = int(min_samples)
        self.up_ratio = float(up_ratio)
        self.up_frames = int(up_frames)
        self.probation = int(probation if probation is not None else up_frames)
        self.max_up_frames = int(max_up_frames if max_up_frames is not None else 16 * up_frames)
        self.events: list[QosEvent] = []  # the latest MAX_EVENTS_KEPT changes
        self.event_count = 0
        self._times: deque[float] = deque(maxlen=int(window))
        self._calm = 0  # consecutive frames with P99 under up_ratio x budget
        self._frame = 0
        self._climbed_at: int | None = None  # frame of the last step up
        self._hold: dict[int, int] = {}  # per-rung hold before climbing from it

    @property
    def rung(self) -> Rung:
        return self.ladder[self.level]

    def p99(self) -> float | None:
        if not self._times:
            return None
        return percentile_floor(self._times, self.percentile)

    def hold_for(self, level: int) -> int:
        return self._hold.get(level, self.up_frames)

    def reset_window(self) -> None:
        """Forget the timings (after a preset switch or a pause)."""
        self._times.clear()
        self._calm = 0

    def force(self, level: int, pts_ns: int, reason: str) -> QosEvent | None:
        if not 0 <= level < len(self.ladder):
            raise ValueError(f"level must index the ladder, got {level}")
        if level == self.level:
            return None
        return self._change(level, pts_ns, reason)

    def _change(self, to: int, pts_ns: int, reason: str) -> QosEvent:
        ev = QosEvent(pts_ns, self.level, to, reason)
        log.info(
            "quality %s: rung %d (%s) -> %d (%s): %s",
            "down" if to > self.level else "up",
            self.level,
            self.ladder[self.level].name,
            to,
            self.ladder[to].name,
            reason,
        )
        keep_latest(self.events, ev)
        self.event_count += 1
        self.level = to
        self.reset_window()
        return ev

    def feed(self, gpu_ms: float, pts_ns: int) -> QosEvent | None:
        """One frame's GPU time (CUDA events) at the current rung; returns the change, if any."""
        self._frame += 1
        self._times.append(float(gpu_ms))
        p99 = self.p99()
        assert p99 is not None
        budget = self.budget_ms
        if len(self._times) >= self.min_samples and p99 > budget:
            if self.level + 1 >= len(self.ladder):
                self._calm = 0
                return None  # cheapest rung already: the presenter must drop frames
            failed = (
                self._climbed_at is not None and self._frame - self._climbed_at <= self.probation
            )
            reason = (
                f"P{self.percentile:g} {p99:.2f} ms over the {budget:.2f} ms budget "
                f"({len(self._times)} frames)"
            )
            if failed:
                hold = min(self.max_up_frames, 2 * self.hold_for(self.level + 1))
                self._hold[self.level + 1] = hold
                reason += f"; the climb failed, next climb waits {hold} frames"
            self._climbed_at = None
            return self._change(self.level + 1, pts_ns, reason)
        if p99 < self.up_ratio * budget and self.level > 0:
            self._calm += 1
            if self._calm >= self.hold_for(self.level):
                reason = (
                    f"P{self.percentile:g} {p99:.2f} ms under {self.up_ratio:g} x budget "
                    f"({self.up_ratio * budget:.2f} ms) for {self._calm} frames"
                )
                self._climbed_at = self._frame
                return self._change(self.level - 1, pts_ns, reason)
        else:
            self._calm = 0
        return None
