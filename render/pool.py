"""`PooledRenderStage`: the avatar rendered by M worker processes, delivered in order.

(The built-in idol by default; `avatar` names another source, render/avatar_source.py, which
each worker rebuilds from its path: a layered avatar's rig is stepped the same way.)

The Skia idol render is single-threaded CPU work (~8 ms a frame at 640x360, several times that
at 1080p), so one `RenderStage` caps an offline render near 130 fps at 640x360. Offline the
params of every frame are known before the render starts (the `AvatarTrack`), so frames can be
rendered ahead and out of order by several processes and handed on in order.

Exactness. The idol's picture and motion vectors depend on history only through the rig:
the hair springs (`render.rig.Rig`) integrate the pose over all previous frames, and the motion
vectors compare this frame's part matrices with the previous frame's. Replaying the springs in
every worker would cost each worker the rig steps of every frame; instead the stage's thread in
the main process steps the one `Rig` through the track in order (≈0.3 ms a frame, the same code
and the same float operations as the single-process render) and sends each worker, with the
frame index, the rig's matrices for that frame and for the one before. The worker's
`IdolRenderer` gets them through a stand-in rig, so it draws exactly what the single-process
render draws: identical pixels and identical motion vectors (tests/test_parallel_render.py
checks this bit for bit).

Flow. `R` result slots in shared memory (image RGBA uint8 + motion float32 per slot); frame i
uses slot i mod R, so at most R frames are in flight; each goes to the worker with the fewest
frames outstanding. `process(frame)` tops the pipeline up, waits for frame i, copies image and
motion out of the slot (into pinned memory when a CUDA device consumes them, as `RenderStage`
does) and frees the slot. A worker that fails or dies ends the render with a one-line
`RenderWorkerError`.
"""

from __future__ import annotations

import contextlib
import time
from multiprocessing.connection import Connection

import numpy as np

from core.avatar import AvatarTrack
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from core.workers import (
    SharedArena,
    WorkerProcessError,
    exit_text,
    ignore_sigint,
    one_line,
    page_round,
    ready_workers,
    spawn_context,
    start_worker,
    stop_processes,
    usable_cores,
    wait_started,
)
from presets.schema import LineStyle, Palette

MAX_RENDER_WORKERS = 64
LIVE_SLOTS = 2  # live (render.process): a frame is copied out of one while the next is drawn


class RenderWorkerError(WorkerProcessError):
    """A render worker process failed or died."""


def auto_render_workers(width: int, height: int, cores: int | None = None) -> int:
    """How many render processes `--render-workers auto` uses.

    Fewer than 8 cores: 1 (the in-process `RenderStage`; the encoder and the other stages need
    the few cores there are). Otherwise a quarter of the cores, at least 2 and at most 8
    (16 cores → 4: about 500 frames/s of 640x360 idol, ~100 of 1080p).
    """
    cores = usable_cores() if cores is None else cores
    if cores < 8:
        return 1
    return max(2, min(8, cores // 4))


class _GivenRig:
    """Stands in for `render.rig.Rig` in a worker: returns the matrices the main process sent."""

    def __init__(self) -> None:
        self.next: np.ndarray | None = None

    def reset(self) -> None:
        self.next = None

    def matrices(self, params) -> np.ndarray:
        mats, self.next = self.next, None
        if mats is None:
            raise RuntimeError("render worker: no rig matrices for this frame")
        return mats


def _slot_layout(width: int, height: int) -> tuple[int, int]:
    image = page_round(width * height * 4)
    motion = page_round(width * height * 8)
    return image, image + motion


def _render_main(
    index, offline, width, height, palette, line, avatar, mapping, tasks: Connection, out
):
    """Entry point of a render process (spawned).

    Offline: tasks are (frame, slot, params, rig matrices, previous matrices) — the pool's main
    process steps the one rig. The frame's params travel with its task, not the whole track
    with the spawn: a spawn's arguments go down a pipe, and over the pipe's 64 KiB the parent
    waits for the child's interpreter to start reading (a song's track is larger). Live
    (render.process): tasks are
    ("base", frame, slot, params) — the whole idol into `slot`, this worker's renderer stepping
    its own rig — and ("mouth", frame, offset, params) — the late mouth
    (IdolRenderer.redraw_mouth) on the worker's copy of the last base, its box written at
    `offset`; "reset" starts the rig afresh; "no motion" stops drawing motion vectors (the
    slots' motion stays unwritten); "priority" asks for real-time scheduling and answers
    ("priority", -1, what the OS gave: core.priority's sentence). `avatar`: the AvatarSpec to
    draw (None: the built-in idol), rebuilt here from its path."""
    ignore_sigint()
    frame = -1
    try:
        from render.avatar_source import as_spec

        renderer = as_spec(avatar).make_renderer(width, height, palette, line)
        if offline:
            rig = renderer.rig = _GivenRig()
        image_bytes, slot_bytes = _slot_layout(width, height)
        base_rgba = None  # live: the worker's copy of the frame the next mouth goes on
        out.send(("ready", index))
        while True:
            try:
                msg = tasks.recv()
            except EOFError:
                break
            if msg is None:
                break
            if msg == "reset":
                renderer.reset()
                continue
            if msg == "no motion":
                renderer.with_motion = False
                continue
            if msg == "priority":  # live: this process asks for real-time scheduling
                from core.priority import request_realtime_priority

                out.send(("priority", -1, request_realtime_priority()))
                continue
            t0 = time.perf_counter()
            if not offline and msg[0] == "mouth":
                _, frame, offset, params = msg
                x0, y0, x1, y1 = box = renderer.redraw_mouth(base_rgba, params)
                dst = mapping.array(offset, (y1 - y0, x1 - x0, 4), np.uint8)
                dst[...] = base_rgba[y0:y1, x0:x1]
                del dst
                out.send(("mouth", frame, box, (time.perf_counter() - t0) * 1e3))
                continue
            if not offline:
                _, frame, slot, params = msg
            else:
                frame, slot, params, mats, prev = msg
                rig.next = mats
                # the previous frame's pixel matrices, as IdolRenderer.render computes them
                renderer.prev = None if prev is None else renderer.view[None] @ prev
            base = slot * slot_bytes
            img = mapping.array(base, (height, width, 4), np.uint8)
            mot = mapping.array(base + image_bytes, (height, width, 2), np.float32)
            if not offline:  # the worker keeps its own copy for the mouths to come
                out_frame = renderer.render_base(params)
                base_rgba = out_frame.rgba
                img[...] = base_rgba
            elif hasattr(renderer, "render_into"):  # straight into the slot, no copy
                out_frame = renderer.render_into(params, img)
            else:
                out_frame = renderer.render(params)
                img[...] = out_frame.rgba
            if out_frame.motion is not None:
                mot[...] = out_frame.motion
            del img, mot
            out.send(("frame", frame, slot, (time.perf_counter() - t0) * 1e3))
    except BaseException as exc:
        with contextlib.suppress(Exception):
            out.send(("error", index, frame, one_line(exc)))
        import os

        os._exit(1)
    import os

    os._exit(0)


class PooledRenderStage(BaseStage):
    """Params in, image + motion out, like `RenderStage`, rendered by `workers` processes."""

    name = "render"
    needs = spec("params")

    def __init__(
        self,
        track: AvatarTrack,
        width: int,
        height: int,
        palette: Palette,
        line: LineStyle,
        workers: int = 2,
        in_flight: int | None = None,
        first_index: int = 0,
        start_timeout_s: float = 120.0,
        avatar=None,
    ) -> None:
        from render.avatar_source import as_spec

        if not 1 <= int(workers) <= MAX_RENDER_WORKERS:
            raise ValueError(f"render workers must be 1..{MAX_RENDER_WORKERS}, got {workers}")
        self.track = track
        self.width, self.height = int(width), int(height)
        self.palette, self.line = palette, line
        self.avatar = as_spec(avatar)
        self.workers = int(workers)
        self.in_flight = int(in_flight) if in_flight else 2 * self.workers + 2
        self.first_index = first_index
        self.start_timeout_s = start_timeout_s
        self.gives = spec("image", "motion", size=(self.width, self.height), device="cpu")
        self.with_motion = True
        self.pin = False
        self.worker_ms: list[float] = []  # render time of each frame inside its worker
        self._procs: list = []
        self._tasks: list[Connection] = []
        self._results: list[Connection] = []
        self._outstanding: list[int] = []
        self._arena: SharedArena | None = None
        self._rig = None
        self._prev_mats: np.ndarray | None = None
        self._next = 0  # next frame to dispatch
        self._done: dict[int, tuple[int, float]] = {}
        self._starting: set[int] = set()  # workers not yet ready

    def drop_motion(self) -> None:
        """Workers draw no motion vectors: no stage after this one reads them (as
        `RenderStage.drop_motion`)."""
        self.gives = spec("image", size=(self.width, self.height), device="cpu")
        self.with_motion = False

    # ------------------------------------------------------------------ life cycle

    def setup(self, ctx: Context) -> None:
        import torch

        self.pin = ctx.extras.get("device") == "cuda" and torch.cuda.is_available()
        self._rig = self.avatar.make_rig()
        self._prev_mats = None
        self._next = 0
        self._done.clear()
        _, slot_bytes = _slot_layout(self.width, self.height)
        self._arena = SharedArena(slot_bytes * self.in_flight, "kagura-render")
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for c in self._tasks:
            with contextlib.suppress(Exception):
                c.send(None)
        stop_processes(self._procs, self._tasks + self._results, grace_s=2.0)
        self._procs, self._tasks, self._results, self._outstanding = [], [], [], []
        self._starting = set()
        if self._arena is not None:
            self._arena.close()
            self._arena = None

    def process(self, frame: Frame) -> Frame:
        i = frame.index - self.first_index
        if not 0 <= i < len(self.track):
            raise RenderWorkerError(f"render pool: frame {frame.index} is not in the track")
        if int(self.track.pts_ns[i]) != frame.pts_ns:
            raise RenderWorkerError(
                f"render pool: frame {frame.index} has pts {frame.pts_ns} ns, the track "
                f"{int(self.track.pts_ns[i])} ns"
            )
        if self._starting:
            self._wait_started()
        self._dispatch(i)
        while i not in self._done:
            self._collect()
            self._dispatch(i)
        slot, worker_ms = self._done.pop(i)
        image, motion = self._copy_out(slot)
        self.worker_ms.append(worker_ms)
        self._dispatch(i + 1)
        # "render" itself is the time this stage's thread spends per frame (the graph sets it)
        return frame.with_(image=image, motion=motion).timed("render_worker", worker_ms)

    # ------------------------------------------------------------------ workers

    def _start(self) -> None:
        ctx = spawn_context()
        for k in range(self.workers):
            args = (k, True, self.width, self.height, self.palette, self.line, self.avatar)
            proc, task_w, res_r = start_worker(
                ctx, _render_main, (*args, self._arena.handle), f"kagura-render-{k}"
            )
            if not self.with_motion:
                task_w.send("no motion")
            self._procs.append(proc)
            self._tasks.append(task_w)
            self._results.append(res_r)
            self._outstanding.append(0)
        self._starting = set(range(self.workers))

    def _wait_started(self) -> None:
        """Waits for the workers' "ready" at the first frame, not in `setup`: the stages and the
        sink after this one set up while the workers import."""
        late = RenderWorkerError("render workers did not start in time")
        wait_started(
            self._starting,
            self.start_timeout_s,
            lambda waiting: self._collect(timeout=1.0, starting=waiting),
            late,
        )

    def _dispatch(self, consumed_upto: int) -> None:
        """Send frames until `in_flight` are out beyond the next one to be consumed."""
        limit = min(len(self.track), consumed_upto + self.in_flight)
        while self._next < limit:
            j = self._next
            # the rig steps through the track in order, exactly as IdolRenderer.render does
            params = self.track[j]
            mats = self._rig.matrices(params.clamped())
            k = int(np.argmin(self._outstanding))
            try:
                self._tasks[k].send((j, j % self.in_flight, params, mats, self._prev_mats))
            except OSError:
                self._raise_dead(k, j)
            self._outstanding[k] += 1
            self._prev_mats = mats
            self._next += 1

    def _collect(self, timeout: float = 0.5, starting: set[int] | None = None) -> None:
        live = sorted(starting) if starting is not None else range(self.workers)
        for k, ready in ready_workers(self._procs, self._results, live, timeout):
            if ready is None:
                self._raise_dead(k)
            try:
                msg = ready.recv()
            except (EOFError, OSError):
                self._raise_dead(k)
            if msg[0] == "frame":
                _, j, slot, ms = msg
                self._done[j] = (slot, ms)
                self._outstanding[k] -= 1
            elif msg[0] == "ready" and starting is not None:
                starting.discard(k)
            elif msg[0] == "error":
                _, _, j, text = msg
                at = f" on frame {j + self.first_index}" if j >= 0 else ""
                raise RenderWorkerError(f"render worker {k} failed{at}: {text}")

    def _raise_dead(self, k: int, frame: int | None = None) -> None:
        self._procs[k].join(2.0)
        at = f" (frame {frame + self.first_index})" if frame is not None else ""
        raise RenderWorkerError(f"render worker {k} {exit_text(self._procs[k])}{at}")

    def _copy_out(self, slot: int):
        return copy_out_slot(
            self._arena, slot, self.width, self.height, self.pin, motion=self.with_motion
        )


def copy_out_slot(
    arena: SharedArena, slot: int, width: int, height: int, pin: bool, motion: bool = True
):
    """Image (uint8 RGBA) and motion (float32; None when `motion` is False) of a result slot,
    copied into fresh tensors (pinned when a CUDA device consumes them), so the slot can be
    reused at once."""
    import torch

    image_bytes, slot_bytes = _slot_layout(width, height)
    base = slot * slot_bytes
    img = arena.array(base, (height, width, 4), np.uint8)
    image = torch.empty((height, width, 4), dtype=torch.uint8, pin_memory=pin)
    # numpy's copy: a plain memcpy (torch's CPU copy_ from a numpy-backed tensor is
    # several times slower on small machines)
    np.copyto(image.numpy(), img)
    if not motion:
        return image, None
    mot = arena.array(base + image_bytes, (height, width, 2), np.float32)
    flow = torch.empty((height, width, 2), dtype=torch.float32, pin_memory=pin)
    np.copyto(flow.numpy(), mot)
    return image, flow
