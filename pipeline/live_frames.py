"""The live session's frame thread: at each display tick, the newest params → one frame.

    frames = FrameLoop(fps, source, analysis, looks, expressions, timings, clock=..., gpu=...)
    frames.run(params, outbox)        # a node of the session's graph (pipeline/graph.py), on
                                      # its own thread, until the clock says stop
    frames.publisher().run(issued, tee)      # GPU sessions: the node after it

At the display fps — on a free-running timer, or, once the display says when it ticks
(`phase_lock.set_display_timing`), phase-locked: each frame starts at the tick that will show
it minus the predicted frame time (pipeline/phase_lock.py) — it reads pts = the audio clock
now (the source's newest sample); a tick with no new audio starts no frame (`stalled_ticks`),
nor does one finding the analysis lastingly behind (pipeline/shedding.py). The newest params +
the expression blend → the look's RenderStage → StylizeStage, the idol in two steps
(`late_mouth`, default): the next frame's idol is drawn ahead — right after a frame is handed
on, from the newest pose (RenderStage.prepare), or, by a render process, beside this thread,
asked for behind the frame before's mouth with its pose; when that frame starts only its mouth
is redrawn from the newest audio (finish: the cheap part). The frame, with its look, goes into
the node's outbox: the session's output tee (pipeline/live_chain.py `LiveOutput`: the display's
queue and the recorder), called on this thread.

What a frame runs through, in order, is one value, checked when each look is built:
pipeline/live_chain.py `live_stages` (the look's render, then its stylize here, or
`GpuChain.parts` and its readback): the node's `parts`, which the graph checks when it starts.
The loop is one node of the graph, not a thread per stage: the idol is drawn in two steps
around the frame's start and the GPU part is issued without waiting, on one thread, which a
thread per stage would not keep (docs/ARCHITECTURE.md).

With GPU stages (`gpu`, pipeline/live_gpu.py) this thread issues the frame to the GPU without
waiting (`gpu.submit`: the frame comes back pending, `Frame.ready`) into its outbox, the edge to
the next node, `FramePublisher` (its own thread), which waits for each (`gpu.finish`) and
hands it to the tee. At most `max_in_flight` frames are on
the GPU: a tick finding it that busy starts no frame (`gpu_busy_ticks`). The quality ladder
(pipeline/ladder/) changes its rung between frames on this thread (`gpu.poll`, from the
finished frames' CUDA events).

Every frame carries `timings[AUDIO_AGE]`: ms from the audio its mouth was analysed from (the
centre of the 12 ms level window that sets the openness, i.e. the newest analysed sample minus
6 ms — of the last hop, or of the mouth latched after it: LiveLipSync.latch) to the frame's pts
— through the diffusion stream batch, of the frame whose picture it shows. Audio-to-photon =
present time − pts + audio_age.

Time: every instant and every wait of this thread goes through `clock` (`WallClock`: the
monotonic clock, and sleeps that end when the session stops); a test passes simulated time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from core.avatar import AvatarParams
from core.clock import NS_PER_S
from core.frame import MOUTH_TIMING, RENDER_WAIT, Frame
from core.stats import Timings
from pipeline.live_chain import live_stages
from pipeline.look import Look
from pipeline.phase_lock import PhaseLock
from pipeline.queues import BoundedQueue, Closed
from pipeline.shedding import Shedder

log = logging.getLogger(__name__)

AUDIO_AGE = "audio_age"  # = pipeline.ladder.AUDIO_AGE (not imported: torch-free here)
# frame.timings: the frame's start on the loop's clock, in ms (dotted: not a stage time)
STARTED = "frame.started"
LEAD = "frame.lead"  # phase-locked: the lead this frame was started with (ms before its tick)
TARGET = "frame.target"  # phase-locked: the display tick this frame was started for (ms)
# the frame thread's own issuing of a frame (from its start to the GPU chain's submit): wall ms
# and this thread's CPU ms over that span — wall far above CPU means the thread was waiting to
# run (the GIL, or the machine), not working (the bench's --trace keeps both)
ISSUE_WALL = "frame.issue"
ISSUE_CPU = "frame.issue_cpu"
LEVEL_WINDOW_CENTRE_MS = 6.0  # the lip-sync openness comes from the newest 12 ms of audio
# the idol drawn ahead is copied out of the render process while the frame thread waits for
# the frame's start, but not later than this before it (room for the copy)
COLLECT_SPARE_NS = 2_000_000


class LoopClock(Protocol):
    """The frame loop's time: `now_ns()`, and `sleep(seconds)`, True when the loop must end
    (checked after every sleep, also one of 0 s)."""

    def now_ns(self) -> int: ...

    def sleep(self, seconds: float) -> bool: ...


class WallClock:
    """time.monotonic_ns(), and sleeps that end early when `stop` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def sleep(self, seconds: float) -> bool:
        return (seconds > 0 and self._stop.wait(seconds)) or self._stop.is_set()


class FrameLoop:
    """The frame thread's state and body (`run`; GPU sessions: `publisher()` for the next
    node); see the module docstring.

    `source`: pts_ns() is the audio clock. `analysis.hops` says whether the analysis has
    analysed anything yet (the params come in `run`'s inbox). `looks.current`: the look a frame
    is drawn with (read once per frame). `expressions.apply(params, pts)`: the triggered expressions.
    `on_tick()`: called at every tick before its pts is read (the source's state). `failed()`:
    True once the session reported an error (then nothing is shed). `on_error(message)`: this
    loop failed and ends. `gpu`: the GPU chain (None: stylize on this thread).
    """

    name = "frames"  # its node in the session's graph

    def __init__(
        self,
        fps: int,
        source: Any,
        analysis: Any,
        looks: Any,
        expressions: Any,
        timings: Timings,
        *,
        clock: LoopClock,
        on_tick: Callable[[], None] = lambda: None,
        failed: Callable[[], bool] = lambda: False,
        on_error: Callable[[str], None] = lambda message: None,
        gpu: Any = None,
    ) -> None:
        self.fps = int(fps)
        self.source = source
        self.analysis = analysis
        self.looks = looks
        self.expressions = expressions
        self.clock = clock
        self.gpu = gpu
        self._timings = timings
        self._on_tick = on_tick
        self._failed, self._on_error = failed, on_error
        # the scheduler (display timing, lead, learning): its own object on the same clock,
        # tested on simulated time (tests/test_live_phase_lock.py)
        self.phase_lock = PhaseLock(self.fps, now_ns=clock.now_ns)
        # ticks that start no frame: the analysis lastingly behind (pipeline/shedding.py)
        self.shedder = Shedder(self.fps)
        # True: each frame's idol is drawn ahead and its mouth redrawn at the frame's start
        # (render/stage.py); False: drawn whole at the start (for comparison)
        self.late_mouth = True
        # True: what was learnt while the GPU chain's lower rungs were set up beside the first
        # frames is forgotten when they are ready (PhaseLock.forget); False: kept (comparison)
        self.relearn_after_setup = True
        self.lag_ms: deque[float] = deque(maxlen=300)  # the mouth's age at each frame's pts
        self.last_frame: Frame | None = None
        self.frames_produced = 0
        self.stalled_ticks = 0  # display ticks with no new audio (source stopped / lost)
        self.late_ticks = 0  # ticks the frame thread started over a period late
        self.gpu_busy_ticks = 0  # ticks that started no frame: max_in_flight on the GPU

    @property
    def parts(self) -> tuple:
        """What a frame of the current look runs through, in order (pipeline/live_chain.py)."""
        return live_stages(self.looks.current, self.gpu)

    @property
    def publishes_later(self) -> bool:
        """Frames leave this node pending (on the GPU): a `publisher()` node waits for them."""
        return self.gpu is not None and bool(self.gpu.cuda)

    def publisher(self) -> FramePublisher:
        return FramePublisher(self)

    # -- the node -----------------------------------------------------------------------------

    def run(self, inbox: BoundedQueue[AvatarParams], outbox: Any) -> None:
        """The frame thread's body: the newest params from `inbox` → frames into `outbox`
        (pending `(frame, look, started_ns)` when `publishes_later`, else `(frame, look)` for
        the tee), until the clock says stop (or a failure, reported). The graph closes
        `outbox` when it returns: the publisher drains what is on the GPU, then ends."""
        try:
            self._loop(inbox, outbox)
        except Exception as exc:
            log.exception("live frames")
            self._on_error(f"frame production failed: {exc}")

    # -- one frame ----------------------------------------------------------------------------

    def publish(self, frame: Frame, look: Look, t0: int, outbox: Any) -> None:
        """A finished frame's timings and counters, then `(frame, look)` into `outbox` (the
        session's tee: the display queue, latest wins, and the recorder)."""
        total = (self.clock.now_ns() - t0) / 1e6
        self._timings.add("render", frame.timings.get("render", 0.0))
        for key in (MOUTH_TIMING, RENDER_WAIT):  # the late mouth, on the critical path
            if key in frame.timings:
                self._timings.add(key, frame.timings[key])
        if self.gpu is None:
            self._timings.add("stylize", frame.timings.get("stylize", 0.0))
        self._timings.add("frame", total)
        self.phase_lock.note_frame(frame.timings.get(STARTED), total)
        frame = frame.timed("frame", total)
        self.frames_produced += 1
        self.last_frame = frame
        outbox.put((frame, look))

    def _loop(self, inbox: BoundedQueue[AvatarParams], outbox: Any) -> None:
        clock = self.clock
        period = 1.0 / self.fps
        params = AvatarParams()
        fresh = False  # params arrived since the last frame started
        last_pts = -1
        index = 0
        gpu_look = self.looks.current
        next_t = clock.now_ns() / 1e9
        target: int | None = None  # phase-locked: the display tick the last frame aimed at
        # the GPU chain's lower rungs are still being set up (their end: PhaseLock.forget)
        ladder_pending = self.gpu is not None and self.gpu.ladder_pending
        ladder_pending = ladder_pending and self.relearn_after_setup

        def newest() -> AvatarParams:
            nonlocal params, fresh
            while len(inbox):  # single consumer: never blocks
                params = inbox.get()
                fresh = True
            return params

        while True:
            look = self.looks.current
            if self.late_mouth and look.render.prepared_index != index:
                # the next frame's idol, drawn now from the newest pose (a render process asks
                # for it in `finish`, beside this thread); its mouth is redrawn when it starts
                pts = self.source.pts_ns()
                look.render.prepare(Frame(pts, index, self._posed(newest(), pts)))
            if self.phase_lock.locked:
                target = self._wait_phase_locked(look, target)
                if target is None:
                    return
                next_t = clock.now_ns() / 1e9 + period  # if the display timing goes away
            else:
                target = None
                next_t = self._wait_free_running(look, next_t, period)
                if next_t is None:
                    return
            started_ms = clock.now_ns() / 1e6
            self._on_tick()
            pts = self.source.pts_ns()
            if pts <= last_pts:
                self.stalled_ticks += 1
                continue
            last_pts = pts
            params = newest()
            # how old the mouth is at the frame's pts, + ~6 ms for the 12 ms level window
            age = (pts - params.pts_ns) / 1e6 + LEVEL_WINDOW_CENTRE_MS
            # not before the first hop (the analysis is still building its engines: nothing
            # to wait for), nor after a failure
            if (
                self.analysis.hops
                and not self._failed()
                and self.shedder.tick(clock.now_ns() / 1e9, age)
            ):
                continue
            if fresh or self.lag_ms:
                self.lag_ms.append(age)
            fresh = False
            # no audio analysed yet: the frame's mouth comes from no audio (no age to report)
            timings = {AUDIO_AGE: age} if self.lag_ms else {}
            timings[STARTED] = started_ms
            lead_ms = self.phase_lock.lead_ms
            if target is not None and lead_ms is not None:
                timings[LEAD] = lead_ms
                timings[TARGET] = target / 1e6
            t0 = clock.now_ns()
            cpu0 = time.thread_time_ns()
            p = self._posed(params, pts)
            look = self.looks.current  # one read: this frame is entirely one look
            gpu = self.gpu
            if gpu is not None:
                if look is not gpu_look:  # a new preset: new diffusion constants, refit ladder
                    gpu.set_preset(look.preset)
                    gpu_look = look
                gpu.poll()  # finished frames' CUDA events -> the ladder (no waiting)
                if ladder_pending and not gpu.ladder_pending:
                    # the lower rungs' set-up beside the first frames slowed them: not a
                    # frame time to plan the lead on (PhaseLock.forget)
                    self.phase_lock.forget()
                ladder_pending = ladder_pending and gpu.ladder_pending
                if gpu.busy():
                    self.gpu_busy_ticks += 1
                    continue
            frame = self._draw_idol(look, Frame(pts, index, p, timings=timings))
            index += 1
            if gpu is not None:
                frame = gpu.submit(frame, look.stylize)
                issued = {
                    ISSUE_WALL: (clock.now_ns() - t0) / 1e6,
                    ISSUE_CPU: (time.thread_time_ns() - cpu0) / 1e6,
                }
                frame = frame.with_(timings={**frame.timings, **issued})
                if self.publishes_later:
                    outbox.put((frame, look, t0))
                else:
                    self.publish(frame, look, t0, outbox)
                continue
            frame = look.stylize.process(frame)
            self.publish(frame, look, t0, outbox)

    def _posed(self, params: AvatarParams, pts: int) -> AvatarParams:
        """`params` as of `pts`, with the triggered expressions blended in."""
        return self.expressions.apply(dataclasses.replace(params, pts_ns=pts), pts)

    # -- waiting for a frame's start ----------------------------------------------------------

    def _wait_phase_locked(self, look: Look, target: int | None) -> int | None:
        """Sleep until the start of the frame after the one that targeted `target` (copying
        the idol drawn ahead out meanwhile); returns the display tick it targets, None when
        the loop must end."""
        clock = self.clock
        start, target, late = self.phase_lock.next_start_ns(clock.now_ns(), target)
        self.late_ticks += late
        self._collect_idol(look, start)
        if clock.sleep((start - clock.now_ns()) / 1e9):
            return None
        self.phase_lock.note_start(clock.now_ns(), start)
        return target

    def _wait_free_running(self, look: Look, next_t: float, period: float) -> float | None:
        """Sleep until `next_t` (s on the clock) on the free-running timer; returns the next
        frame's time, None when the loop must end. More than a period behind: skip, don't
        catch up."""
        clock = self.clock
        self._collect_idol(look, round(next_t * NS_PER_S))
        if clock.sleep(next_t - clock.now_ns() / 1e9):
            return None
        now = clock.now_ns() / 1e9
        next_t += period
        if now - next_t > period:
            self.late_ticks += 1
            next_t = now + period
        return next_t

    def _draw_idol(self, look: Look, frame: Frame) -> Frame:
        """The frame's image and motion. Late mouth: the idol prepared ahead (or, after a look
        switch, one drawn now) with its mouth from `frame.params`; a render process is asked
        for the next frame's idol right behind it, from the same pose."""
        if not self.late_mouth:
            return look.render.process(frame)
        if look.render.draws_beside:
            return look.render.finish(frame, then=frame.params)
        return look.render.finish(frame)

    def _collect_idol(self, look: Look, start_ns: int) -> None:
        """While the frame thread waits for a frame's start: copy its idol out of the render
        process as soon as it is drawn (RenderProcessStage.collect), so the start has only the
        mouth left — but stop COLLECT_SPARE_NS before the start: the copy must not delay it."""
        if self.late_mouth and look.render.draws_beside:
            wait = (start_ns - COLLECT_SPARE_NS - self.clock.now_ns()) / 1e9
            if wait > 0:
                look.render.collect(wait)


class FramePublisher:
    """GPU sessions: the node after the frame loop. Waits for each issued frame's done event
    (this thread only: `gpu.finish` sleeps on a blocking-sync event) and publishes it
    (`FrameLoop.publish`) into the tee; ends when the frame loop's edge is closed and drained."""

    name = "publish"
    parts = ()  # it waits for the chain the frame node issued; it adds nothing

    def __init__(self, loop: FrameLoop) -> None:
        self.loop = loop

    def run(self, inbox: BoundedQueue[tuple], outbox: Any) -> None:
        loop = self.loop
        try:
            while True:
                try:
                    frame, look, t0 = inbox.get()
                except Closed:
                    return
                frame = loop.gpu.finish(frame)  # a blocking-sync event: this thread sleeps
                loop.publish(frame, look, t0, outbox)
        except Exception as exc:
            log.exception("live publish")
            loop._on_error(f"frame publishing failed: {exc}")
