"""QualityControl: reads the stages' CUDA events without waiting, feeds the controller in
frame order, and posts each rung change upstream to every ladder stage.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from core.frame import Frame
from core.stats import Timings
from pipeline.ladder.stage import AUDIO_AGE, RUNG_SUFFIX, Control, LadderStage, StageTimer, Timed
from pipeline.quality import QosEvent, QualityController, Rung, keep_latest

log = logging.getLogger("kagura.quality")

TOTAL = "ladder total"  # stage_stats() key: the frame's cost the controller decides on


# ---------------------------------------------------------------------------------------------
# the control loop


@dataclass
class _Pending:
    index: int
    pts_ns: int
    levels: dict[str, float]
    wall: dict[str, float]
    held: bool = False  # measured while the controller was held (QualityControl.hold)
    events: list = field(default_factory=list)  # (name, start, end, n)


class QualityControl:
    """Measures the costly stages, feeds `controller`, sends rung changes upstream.

    controller  a QualityController whose ladder is the one the stages apply
                (LadderPlan.rungs)
    stages      the LadderStages (each gets every Control); `Timed` stages are only timed
    measure     stage names whose time makes a frame's cost (default: the LadderStages')
    device      "cuda": CUDA events (see the module doc); anything else: wall times
    on_event    called with each QosEvent (any thread that calls poll/observe)
    adaptive    False: measure and report only; the controller is never fed (no changes)

    hold(on)        held: frames are measured but not fed (their cost is not the rung's:
                    something else shares the GPU, e.g. the lower rungs' set-up); released:
                    the controller's window starts afresh
    observe(frame)  where the time is measured (the graph's sink / on_frame, or the live loop
                    after issuing the frame): queues the frame for measurement and polls
    poll()          reads back every finished frame's events (event.query(), no waiting), in
                    order, and feeds the controller; returns the QosEvents it caused
    """

    def __init__(
        self,
        controller: QualityController,
        stages: Sequence[Any],
        *,
        measure: Sequence[str] | None = None,
        device: str | torch.device = "cpu",
        history: int = 600,
        on_event: Callable[[QosEvent], None] | None = None,
        adaptive: bool = True,
    ):
        self.controller = controller
        self.adaptive = bool(adaptive)
        self.cuda = torch.device(device).type == "cuda"
        self.ladder_stages = [s for s in stages if isinstance(s, LadderStage)]
        self.measure = tuple(
            measure if measure is not None else [s.name for s in self.ladder_stages]
        )
        self.on_event = on_event
        self._lock = threading.Lock()
        self._events: dict[int, list] = {}  # frame index -> [(name, start, end, n)]
        self._order: collections.deque[_Pending] = collections.deque()
        # per stage (and TOTAL: the frame's cost, the sum the controller is fed), the last
        # `history` frames
        self._stage_ms = Timings(history)
        self.fed = 0
        self.transition_frames = 0
        self.held = False
        self.held_frames = 0  # measured while held, not fed
        # the latest changes, with the rung names at the time (a refit renumbers the ladder);
        # bounded (pipeline.quality.keep_latest)
        self.changes: list[dict[str, Any]] = []
        self.change_count = 0
        # the controller keeps its window length only as its deque's maxlen (for retarget)
        self._window = int(controller._times.maxlen or 60)
        for s in stages:
            if isinstance(s, LadderStage | Timed):
                s.timer = StageTimer(self, self.cuda)
        level = controller.level
        for s in self.ladder_stages:
            s.apply(level, controller.ladder[level])

    # -- state ----------------------------------------------------------------------------------

    @property
    def level(self) -> int:
        return self.controller.level

    @property
    def rung(self) -> Rung:
        return self.controller.rung

    @property
    def events(self) -> list[QosEvent]:
        return self.controller.events

    def stage_values(self, name: str) -> list[float]:
        """One stage's measured ms per frame (or TOTAL's), oldest first, the last `history`."""
        return self._stage_ms.values(name)

    def stage_stats(self) -> dict[str, dict[str, float]]:
        """Per stage: median / P99 ms (CUDA-event time on CUDA, else wall), over the history,
        and TOTAL: the ladder stages' sum per frame (core.stats.Timings.snapshot)."""
        return self._stage_ms.snapshot()

    def status(self) -> dict[str, Any]:
        """For the stats overlay and the logs: the rung and the last change."""
        c = self.controller
        try:
            p99 = c.p99()
        except RuntimeError:  # its window changed under us (another thread feeds it)
            p99 = None
        return {
            "adaptive": self.adaptive,
            "held": self.held,  # measuring only: the lower rungs are being set up
            "level": c.level,
            "rungs": len(c.ladder),
            "rung": c.rung.name,
            "budget_ms": round(c.budget_ms, 2),
            "p99_ms": None if p99 is None else round(p99, 2),
            "changes": self.change_count,
            "last_event": dict(self.changes[-1]) if self.changes else None,
        }

    # -- measurement ------------------------------------------------------------------------------

    def record(self, name: str, indices: Sequence[int], start: Any, end: Any) -> None:
        """A stage's event pair around a batch of frames (called on the stage's thread)."""
        n = max(1, len(indices))
        with self._lock:
            for i in indices:
                self._events.setdefault(i, []).append((name, start, end, n))

    def hold(self, on: bool) -> None:
        """Hold the controller (frames from now on are measured, not fed) or release it (the
        window it decides on starts afresh with the next frame measured after this)."""
        with self._lock:
            if self.held and not on:
                self.controller.reset_window()
            self.held = bool(on)

    def observe(self, frame: Frame) -> list[QosEvent]:
        levels = {s.name: frame.timings.get(s.name + RUNG_SUFFIX, -1.0) for s in self.ladder_stages}
        # stage wall times only: "<stage>.<what>" keys are what a stage applied, not times
        wall = {k: float(v) for k, v in frame.timings.items() if "." not in k and k != AUDIO_AGE}
        with self._lock:
            self._order.append(_Pending(frame.index, frame.pts_ns, levels, wall, self.held))
        return self.poll()

    def poll(self) -> list[QosEvent]:
        fired: list[QosEvent] = []
        while True:
            with self._lock:
                if not self._order:
                    break
                p = self._order[0]
                evs = self._events.get(p.index, [])
                if self.cuda and evs and not all(e[2].query() for e in evs):
                    break  # the GPU has not finished this frame yet: look again later
                self._order.popleft()
                self._events.pop(p.index, None)
            ms = dict(p.wall)
            for name, start, end, n in evs:
                ms[name] = start.elapsed_time(end) / n
            ev = self._feed(p, ms)
            if ev is not None:
                fired.append(ev)
        return fired

    def _feed(self, p: _Pending, ms: dict[str, float]) -> QosEvent | None:
        for k, v in ms.items():
            self._stage_ms.add(k, v)
        cost = sum(ms.get(k, 0.0) for k in self.measure)
        self._stage_ms.add(TOTAL, cost)
        c = self.controller
        if any(int(v) != c.level for v in p.levels.values()):
            self.transition_frames += 1  # made (partly) at another rung: says nothing here
            return None
        if not self.adaptive:
            return None
        if p.held:
            self.held_frames += 1
            return None
        self.fed += 1
        ev = c.feed(cost, p.pts_ns)
        if ev is not None:
            self._broadcast(ev)
        return ev

    def _broadcast(self, ev: QosEvent) -> None:
        ladder = self.controller.ladder
        rung = ladder[ev.to_rung]
        self.change_count += 1
        keep_latest(
            self.changes,
            {
                "t": time.monotonic(),
                "pts_ns": ev.pts_ns,
                "from_rung": ev.from_rung,
                "to_rung": ev.to_rung,
                "from": ladder[ev.from_rung].name,
                "to": rung.name,
                "direction": "down" if ev.to_rung > ev.from_rung else "up",
                "reason": ev.reason,
            },
        )
        for s in self.ladder_stages:
            s.post(Control(ev.to_rung, rung, ev))
        if self.on_event is not None:
            try:
                self.on_event(ev)
            except Exception:
                log.exception("quality: on_event callback failed")

    def force(self, level: int, pts_ns: int, reason: str) -> QosEvent | None:
        """Move to rung `level` now, as a measured decision would (benchmarks, tests)."""
        ev = self.controller.force(level, pts_ns, reason)
        if ev is not None:
            self._broadcast(ev)
        return ev

    # -- refit ----------------------------------------------------------------------------------

    def retarget(self, ladder: Sequence[Rung], level: int) -> None:
        """Use a refitted ladder (a preset with other steps): a new controller with the same
        settings, its events carried over, at `level`; the stages get the rung."""
        old = self.controller
        new = QualityController(
            old.budget_ms,
            tuple(ladder),
            start=level,
            window=self._window,
            percentile=old.percentile,
            min_samples=old.min_samples,
            up_ratio=old.up_ratio,
            up_frames=old.up_frames,
            probation=old.probation,
            max_up_frames=old.max_up_frames,
        )
        new.events.extend(old.events)
        new.event_count = old.event_count
        self.controller = new
        for s in self.ladder_stages:
            s.post(Control(level, new.ladder[level], None))
