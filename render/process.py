"""`RenderProcessStage`: the live idol render in a process of its own, frame by frame.

Why: in a live GPU session the frame thread's idol render shares the GIL with the audio
analysis, the GPU publisher, the presenter and the display tick. Measured on the H200
machine (`kagura bench live --headless --device cuda`), the same 640x360 render took 13.2 ms
median / 18.9 ms P99 there against 7.7 ms alone on one thread: the render is the largest part
of the frame time, and the frame time's tail sets the jitter buffer's delay. In a process of
its own the Skia drawing runs beside the other threads instead of between them.

How: the render pool's worker (`render.pool`) in its live mode, in two steps per frame, as
`RenderStage` does them (render/stage.py): `prepare` sends the frame's params and returns at
once; the worker's own `IdolRenderer` (its rig — the hair springs — and its motion history
included) draws the whole idol into one of two shared-memory slots while the frame thread
waits for the frame's start. `finish` sends the newest params: the worker redraws the mouth on
its copy of the frame and writes back only the mouth's box; meanwhile the frame thread copies
the slot out (into pinned memory when a CUDA device consumes it) and then pastes the box in.
`finish(then=params)` asks for the next frame's idol right behind the mouth, so the worker
draws it (into the other slot) while this frame goes on: a whole period for a 7-12 ms render
instead of what is left of it after the GPU submission. Pixels and
motion vectors are identical to `RenderStage`'s (tests/test_render_process.py). One frame at a
time — a live frame is drawn from the newest params, so there is nothing to render further
ahead. The worker that fails or dies ends the session's frames with a one-line
`RenderWorkerError`.

`setup()` starts the worker the first time and only resets its renderer after that (a live
look calls it again after its warm-up frame); `close()` stops it.
"""

from __future__ import annotations

import contextlib
import time
from multiprocessing.connection import Connection

import numpy as np

from core.avatar import AvatarParams
from core.frame import MOUTH_TIMING, RENDER_WAIT, Frame
from core.stage import BaseStage, Context, spec
from core.workers import (
    SharedArena,
    exit_text,
    ready_workers,
    spawn_context,
    start_worker,
    stop_processes,
    wait_started,
)
from presets.schema import LineStyle, Palette
from render.pool import (
    LIVE_SLOTS,
    RenderWorkerError,
    _render_main,
    _slot_layout,
    copy_out_slot,
)

__all__ = ["RenderProcessStage"]


class RenderProcessStage(BaseStage):
    """Params in, image + motion out, like `RenderStage`; drawn by one worker process."""

    name = "render"
    needs = spec("params")

    def __init__(
        self,
        width: int,
        height: int,
        palette: Palette,
        line: LineStyle,
        start_timeout_s: float = 120.0,
        frame_timeout_s: float = 10.0,
        avatar=None,
        realtime: bool = False,
    ) -> None:
        from render.avatar_source import as_spec

        self.width, self.height = int(width), int(height)
        self.palette, self.line = palette, line
        self.avatar = as_spec(avatar)
        self.start_timeout_s = start_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.gives = spec("image", "motion", size=(self.width, self.height), device="cpu")
        self.pin = False
        self._proc = None
        self._task: Connection | None = None
        self._result: Connection | None = None
        self._arena: SharedArena | None = None
        self._prepared: int | None = None  # the frame the worker was asked to draw
        self._collected: tuple | None = None  # (frame, image, motion, ms): copied out early
        self._box_at = 0  # where the worker writes the mouth's box in the arena
        self._launched = False  # the worker is started, and not yet known to be ready
        # live GPU sessions: the worker asks for real-time scheduling first thing after it is
        # ready (its drawing is on every frame's path); what it got, core.priority's sentence
        self.realtime = bool(realtime)
        self.priority: str | None = None

    def setup(self, ctx: Context) -> None:
        import torch

        self.pin = ctx.extras.get("device") == "cuda" and torch.cuda.is_available()
        self._prepared = self._collected = None
        if self._launched:
            self._await_launched()
            return
        if self._proc is not None:
            try:
                self._task.send("reset")  # the rig and the motion history start afresh
            except OSError:
                self._raise_dead(None)
            return
        self.launch()
        self._await_launched()

    def launch(self) -> None:
        """Start the worker without waiting for it: its imports and its idol take a good part
        of a second, which a caller with other work (the live session's set-up) lets pass
        meanwhile; `setup` then waits for it."""
        if self._proc is not None:
            return
        try:
            self._spawn()
        except BaseException:
            self.close()
            raise
        self._launched = True

    def _await_launched(self) -> None:
        late = RenderWorkerError("render process: did not start in time")
        try:
            wait_started({0}, self.start_timeout_s, self._await_ready, late)
            if self.realtime:
                self.priority = self._wait(-1, "priority")[2]
        except BaseException:
            self.close()
            raise
        self._launched = False

    def close(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                self._task.send(None)
        conns = [c for c in (self._task, self._result) if c is not None]
        stop_processes([self._proc] if self._proc is not None else [], conns, grace_s=2.0)
        self._proc, self._task, self._result = None, None, None
        self._launched = False
        if self._arena is not None:
            self._arena.close()
            self._arena = None

    draws_beside = True  # its prepare() returns at once: the idol is drawn in the worker

    def process(self, frame: Frame) -> Frame:
        self.prepare(frame)
        return self.finish(frame)

    @property
    def prepared_index(self) -> int | None:
        """The frame whose idol the worker was asked to draw (None: none)."""
        return self._prepared

    def prepare(self, frame: Frame) -> None:
        """The worker starts drawing frame `frame.index` from `frame.params`; returns at once."""
        if self._proc is None:
            raise RenderWorkerError("render process: prepare() before setup()")
        slot = frame.index % LIVE_SLOTS
        self._send(("base", frame.index, slot, frame.params), frame.index)
        self._prepared = frame.index

    def collect(self, timeout_s: float) -> None:
        """Copies the prepared idol out of its slot once the worker has drawn it, waiting at
        most `timeout_s` for that — what a live session does while it waits for the frame's
        start, so that `finish` has only the mouth left to wait for and copy."""
        i = self._prepared
        if i is None or (self._collected is not None and self._collected[0] == i):
            return
        msg = self._wait(i, "frame", timeout_s)
        if msg is not None:
            self._collected = self._copy_base(i, msg)

    def finish(self, frame: Frame, then: AvatarParams | None = None) -> Frame:
        """The prepared frame with the mouth of `frame.params` (prepared now if it was not).
        `then`: the next frame's idol is drawn from these params, asked for right behind this
        frame's mouth — the worker draws it while this frame is copied out and goes on to the
        GPU (a frame's idol then has the pose of the frame before's start)."""
        t0 = time.perf_counter()
        i = frame.index
        if self._prepared != i:
            self.prepare(frame)
        collected = self._collected if self._collected and self._collected[0] == i else None
        self._prepared = self._collected = None
        self._send(("mouth", i, self._box_at, frame.params), i)
        if then is not None:
            self.prepare(Frame(then.pts_ns, i + 1, then))
        waited = 0.0
        if collected is None:
            msg = self._wait(i, "frame")
            waited = (time.perf_counter() - t0) * 1000.0
            # the worker redraws the mouth on its own copy meanwhile (and then draws the next
            # frame into the other slot): this frame's slot is not touched
            collected = self._copy_base(i, msg)
        _, image, motion, base_ms = collected
        x0, y0, x1, y1 = self._wait(i, "mouth")[2]
        box = self._arena.array(self._box_at, (y1 - y0, x1 - x0, 4), np.uint8)
        image.numpy()[y0:y1, x0:x1] = box
        del box
        ms = (time.perf_counter() - t0) * 1000.0
        out = frame.with_(image=image, motion=motion)
        return out.timed(self.name, base_ms).timed(MOUTH_TIMING, ms).timed(RENDER_WAIT, waited)

    def _copy_base(self, index: int, msg: tuple) -> tuple:
        """(frame, image, motion, worker ms) of the idol the worker's `msg` says is drawn,
        copied out of its slot."""
        slot = index % LIVE_SLOTS
        image, motion = copy_out_slot(self._arena, slot, self.width, self.height, self.pin)
        return index, image, motion, float(msg[3])

    # ------------------------------------------------------------------ the worker

    def _spawn(self) -> None:
        image_bytes, slot_bytes = _slot_layout(self.width, self.height)
        # a slot per frame in flight (one copied out while the next is drawn), then room for
        # the mouth's box (at most a whole image)
        self._box_at = LIVE_SLOTS * slot_bytes
        self._arena = SharedArena(self._box_at + image_bytes, "kagura-live-render")
        args = (0, False, self.width, self.height, self.palette, self.line, self.avatar)
        args = (*args, self._arena.handle)
        self._proc, self._task, self._result = start_worker(
            spawn_context(), _render_main, args, "kagura-live-render"
        )
        if self.realtime:  # its first task: nothing else is asked before the answer is read
            self._task.send("priority")

    def _await_ready(self, waiting: set[int]) -> None:
        msg = self._receive(timeout=1.0)
        if msg is not None and msg[0] == "ready":
            waiting.discard(0)

    def _send(self, task, index: int) -> None:
        try:
            self._task.send(task)
        except OSError:
            self._raise_dead(index)

    def _wait(self, index: int, kind: str, timeout_s: float | None = None) -> tuple | None:
        """The worker's `kind` message ("frame": the idol is drawn, "mouth") for frame `index`;
        None when `timeout_s` is given and passes first. Without it, a frame that takes over
        `frame_timeout_s` is an error."""
        limit = self.frame_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msg = self._receive(timeout=min(0.5, left), index=index)
            if msg is not None and msg[0] == kind and msg[1] == index:
                return msg
        if timeout_s is not None:
            return None
        raise RenderWorkerError(
            f"render process: frame {index} took longer than {self.frame_timeout_s:g} s"
        )

    def _receive(self, timeout: float, index: int | None = None):
        """The worker's next message within `timeout` (None: none yet); raises when it died or
        reported an error."""
        for _, ready in ready_workers([self._proc], [self._result], [0], timeout):
            if ready is None:
                self._raise_dead(index)
            try:
                msg = ready.recv()
            except (EOFError, OSError):
                self._raise_dead(index)
            if msg[0] == "error":
                at = f" on frame {msg[2]}" if msg[2] >= 0 else ""
                raise RenderWorkerError(f"render process failed{at}: {msg[3]}")
            return msg
        return None

    def _raise_dead(self, index: int | None) -> None:
        self._proc.join(2.0)
        at = f" (frame {index})" if index is not None else ""
        raise RenderWorkerError(f"render process {exit_text(self._proc)}{at}")
