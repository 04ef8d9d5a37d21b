"""The GPU stages in the live session, with the quality ladder holding the frame rate.

    gpu = LiveGpu(device="cuda", models=lambda: random_weights("sd-turbo", device="cuda"),
                  make_upscaler=shared_upscalers(make_x4), upscale=4, temporal=True,
                  render_size=(640, 360))
    session = LiveSession(src, "studio", fps=60, gpu=gpu)       # pipeline/live.py

The chain, per frame (the idol is rendered on the CPU by the session's look, as before):

    render (CPU) → upload → stylize → diffusion → temporal → upscale → readback (pinned)
                             └ look ┘  └──────── ladder stages ────────┘

Threads. The session's frame thread issues the whole chain for a frame on one high-priority
CUDA stream (docs/ARCHITECTURE.md, rule 5) and does not wait for it: `submit` hands it to the
chain's `DeviceChain.issue` (pipeline/gpu_chain.py, the same issuing as the offline render's),
which queues the readback into page-locked host memory and records a "done" event; the frame
goes to the session's publisher thread, whose `finish` waits for that event (a blocking-sync
event: that thread sleeps, the frame thread renders the next frame meanwhile) before it puts
the frame on the output queue.
At most `max_in_flight` frames are issued and not yet published: a tick that finds that many
still on the GPU starts no frame (counted as `gpu_busy_ticks`) — latency stays bounded and the
quality ladder, seeing the GPU times over budget, makes frames cheaper.

Timing (docs/ARCHITECTURE.md, rule 6): every stage records CUDA events around its work on that stream;
nothing in the frame thread synchronises. `GpuChain.poll()` (each tick) reads back the events
of finished frames with `event.query()` — typically one or two frames later — and feeds the
QualityControl (pipeline/ladder/), whose Control messages are taken by the ladder
stages at the start of the next frame, on the frame thread. One thread issuing everything on
one stream makes each stage's event interval exactly its own GPU time. Each stage is also
issued inside an NVTX range of its name (core/nvtx.py), so a profiler's timeline shows upload,
stylize, diffusion, temporal, upscale and readback.

The chain as one value: `GpuChain.parts(stylize)` (upload, the look's stylize, the ladder
stages) and `readback` are what `submit` issues, in order, and with the look's render before
them what `pipeline.live_chain.check_live` checks (core.stage.check_chain, the offline
graph's check).

Setup (`GpuChain.setup(look)`, in the session's constructor — off the UI thread in the app):
the models are loaded once (`LiveGpu.models` may be a callable; the result is cached on the
LiveGpu, so the app's next session reuses it), every ladder stage is built, the whole chain is
checked with the session's first look (a GraphError before any stage is set up), then what the
start rung runs on is set up — its DiffusionStage (CUDA graphs for every k <= max_steps) and
its upscalers (a CUDA graph per shape) — and one frame run through the chain at that rung.
The other rungs' stages are set up on a helper thread while the first frames flow
(pipeline/ladder/prepare.py, `LowerRungs`). Until they are ready the ladder is held
(`QualityControl.hold`: frames measured, no decision: their cost is shared with that set-up,
and a step down would make the frame thread wait for it); a step that still comes before they
are ready (a preset switch) waits for them in `submit`, and when they cannot be set up the
ladder keeps only the rungs that can run (one line in the session's notices).

Painting beside the first frames (`LiveGpu.paint_beside`, on by default on CUDA): the start
rung's diffusion variant — its first eager frame and its CUDA-graph captures, most of the
chain's set-up — is left out of the set-up before the first frame and set up first on that
helper thread; until it is ready the first frames pass the diffusion by
(`DiffusionLadder.painting`): the look's picture, upscaled, on screen while the model gets
ready. The frame after it is ready starts painting
(with the latest preset; the temporal history of the unpainted pictures forgotten). Its time
stamps: "live diffusion set up beside the first frames" and "live first painted frame ready"
(core.trace), `status()["painting_after_s"]`. When that set-up fails, the frame thread fails
with its reason (the session reports it), as the set-up before the first frame did.

On the CPU (device "cpu": tests, the CPU benchmark) the same chain runs synchronously in the
frame thread and the stages' wall times are the measurements.

Nothing in this chain may make the frame thread wait for the GPU, rung switches included. A
small device tensor built from a Python list on every frame is such a wait (a blocking
host-to-device copy): hence the cached constants (pipeline/stylize/common.py `_phase_weights`),
and DiffusionLadder resizing the motion itself (DiffusionStage._motion builds one when the work
size differs from the input). `torch.cuda.set_sync_debug_mode("warn")` shows any that creep in.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from core.trace import step
from pipeline.cpu_memory import freeze_setup_objects
from pipeline.device_io import ReadbackStage, UploadStage
from pipeline.gpu_chain import DeviceChain, wait_ready
from pipeline.ladder import (
    DiffusionLadder,
    LadderPlan,
    PresetChange,
    QualityControl,
    StageTimer,
    TemporalLadder,
    VsrLadder,
    fit_ladder,
)
from pipeline.ladder.prepare import LowerRungs
from pipeline.live_chain import check_live
from pipeline.quality import DEFAULT_LADDER, QualityController, Rung

__all__ = ["GpuChain", "LiveGpu", "shared_upscalers"]

log = logging.getLogger(__name__)

BUDGET_SHARE = 0.8  # default budget: this share of the frame period for the ladder stages
# the chain's parts its own StageTimer times; the ladder stages time themselves (LadderStage)
TIMED_BY_CHAIN = frozenset({"upload", "stylize", "readback"})


def shared_upscalers(make_x4: Callable[[tuple[int, int]], Any]) -> Callable:
    """`make_x4(in_size)` -> an UpscaleStage(scale=4) (e.g. pipeline.model_factory.upscale_stage);
    returns `make(in_size, scale)` for VsrLadder.build: the first call's weights (loaded once)
    are shared by every later stage; scales 2/3 wrap the same x4 network in ScaledSR."""
    first: list[Any] = []

    def make(in_size: tuple[int, int], scale: int) -> Any:
        from pipeline.upscale.animevideov3 import ScaledSR
        from pipeline.upscale.stage import UpscaleStage

        if not first:
            proto = make_x4(in_size)
            proto.load()
            first.append(proto)
            if scale == proto.scale:
                return proto
        proto = first[0]
        base = proto.model.net if isinstance(proto.model, ScaledSR) else proto.model
        st = UpscaleStage(
            scale=scale,
            dtype=proto.dtype,
            device=str(proto.device),
            weights=proto.weights,
            in_size=in_size,
            max_batch=1,
            cuda_graph=proto.cuda_graph,
        )
        st.model = base if scale == 4 else ScaledSR(base, 4, scale).eval()
        st.model_name = proto.model_name
        return st

    return make


@dataclass
class LiveGpu:
    """What the live session needs to run the GPU stages (see the module doc).

    device         "cuda" (or "cpu": the same chain, synchronous; tests and CPU benchmarks)
    models         DiffusionModels, a zero-argument callable returning them (loaded at the
                   first session, then cached here), or None: no diffusion
    make_upscaler  (in_size, scale) -> UpscaleStage (see shared_upscalers); None: no VSR
    upscale        the top super-resolution factor (1: none); output = render size x upscale
    temporal       temporal refinement at the top rungs
    render_size    the idol's render size = the diffusion input (None: size / upscale)
    budget_ms      the ladder's budget for the ladder stages' GPU time per frame (P99);
                   None: BUDGET_SHARE x the frame period (0.8 x 1000 / fps: the remaining
                   fifth covers upload, stylize, readback and jitter)
    ladder         the quality ladder before fitting (pipeline.quality.DEFAULT_LADDER)
    adaptive       False: stay on `start_rung` (the measurements are still reported)
    controller     keyword arguments for QualityController (window, min_samples, ...)
    cuda_graphs    capture the diffusion, temporal and upscale CUDA graphs (CUDA only)
    temporal_graph with cuda_graphs: the temporal stage replayed as a graph too (False: issued
                   eagerly, the A/B arm of `kagura bench live --no-temporal-graph`)
    stream_batch   False (default): a frame of k steps runs its k UNet calls one after
                   another, so the picture is the frame's own; True: StreamDiffusion's stream
                   batch (one UNet call for k steps: less GPU time, but the picture lags k - 1
                   frames — a whole frame period of audio-to-photon per extra step, more than
                   the second UNet call costs on the GPU; docs/BENCHMARKS.md)
    max_in_flight  frames issued to the GPU and not yet published
    compile_unet   the UNet compiled by torch.compile before its CUDA graph is captured
                   (`kagura bench pipeline --compile-unet`; inductor's caches in compile_cache)
    """

    device: str = "cuda"
    models: Any = None
    make_upscaler: Callable[[tuple[int, int], int], Any] | None = None
    upscale: int = 1
    temporal: bool = True
    render_size: tuple[int, int] | None = None
    budget_ms: float | None = None
    ladder: Sequence[Rung] = DEFAULT_LADDER
    adaptive: bool = True
    start_rung: int = 0
    controller: dict[str, Any] = field(default_factory=dict)
    cuda_graphs: bool = True
    temporal_graph: bool = True
    stream_batch: bool = False
    max_in_flight: int = 2
    dtype: str = "float16"
    render_process: bool = True  # the idol drawn in its own process (render/process.py)
    # the session's frame and publishing threads and the render process ask for real-time
    # scheduling (core.priority; pipeline/live.py)
    realtime_priority: bool = True
    label: str = ""  # what runs, for reports (e.g. "sd-turbo RANDOM weights")
    notices: list[str] = field(default_factory=list)  # shown to the user (session stats)
    compile_unet: bool = False
    compile_cache: Any = None  # a folder for inductor's caches (None: the user cache dir)
    # the start rung's diffusion set up beside the first frames, which pass it by unpainted
    # until it is ready (None: on CUDA only; see the module doc)
    paint_beside: bool | None = None

    def load_models(self) -> Any:
        m = self.models
        if callable(m):
            m = self.models = m()
        return m

    def sizes(self, size: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        """(render size, output size): render_size x upscale, or `size` / upscale."""
        u = max(1, int(self.upscale))
        if self.render_size is not None:
            r = (int(self.render_size[0]), int(self.render_size[1]))
        else:
            if size[0] % u or size[1] % u:
                raise ValueError(f"live size {size[0]}x{size[1]} is not divisible by x{u}")
            r = (size[0] // u, size[1] // u)
        return r, (r[0] * u, r[1] * u)

    def build(
        self, preset: Any, render_size: tuple[int, int], out_size: tuple[int, int], fps: int
    ) -> GpuChain:
        return GpuChain(self, preset, render_size, out_size, fps)


class GpuChain:
    """One session's GPU chain (see the module doc). Frame-thread methods: set_preset, poll,
    busy, submit. Publisher thread: finish. What a frame runs through, in order:
    `parts(stylize)` then `readback` (pipeline/live_chain.py `live_stages`: the whole chain,
    checked by `check_live` in `setup`)."""

    def __init__(
        self,
        spec: LiveGpu,
        preset: Any,
        render_size: tuple[int, int],
        out_size: tuple[int, int],
        fps: int,
    ):
        self.spec = spec
        self.device = torch.device(spec.device)
        self.cuda = self.device.type == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise RuntimeError("live GPU stages: CUDA is not available (torch sees no GPU)")
        self.render_size, self.out_size, self.fps = render_size, out_size, fps
        self.budget_ms = float(spec.budget_ms or BUDGET_SHARE * 1000.0 / fps)
        self.max_in_flight = max(1, int(spec.max_in_flight))
        self.ctx = Context(
            out_size[0], out_size[1], fps, 48000, mode="live", extras={"device": spec.device}
        )
        self.upload = UploadStage(render_size, spec.device)
        self.readback = ReadbackStage(out_size, spec.device)
        # the chain's one stream, issued the same way as the offline render's (gpu_chain.py)
        self.chain = DeviceChain(self.device)
        self.stream = self.chain.stream
        self.diffusion: DiffusionLadder | None = None
        self.temporal: TemporalLadder | None = None
        self.vsr: VsrLadder | None = None
        self._preset = preset
        self._models: Any = None
        self._lock = threading.Lock()
        self.in_flight = 0
        self.frames = 0
        self.setup_s = 0.0
        self.ladder_ready_s: float | None = None  # the lower rungs' set-up, once done
        self._rest: LowerRungs | None = None  # the lower rungs, while being set up
        self._first: tuple[tuple[int, int], int] = ((0, 0), 0)
        self._first_only = False
        # set by the set-up thread once the start rung's diffusion can paint (paint_beside)
        self._painting_ready = threading.Event()
        self.painting_after_s: float | None = None  # from setup's start to that moment
        self._first_painted_shown = False
        self.plan: LadderPlan
        self.qc: QualityControl
        self.stages: list[Any] = []
        self.closed = False

    # -- setup ----------------------------------------------------------------------------------

    def _plan(self, steps: int, max_steps: int | None) -> LadderPlan:
        return fit_ladder(
            self.spec.ladder,
            render_size=self.render_size,
            diffusion=self.diffusion is not None or self._models is not None,
            steps=steps,
            temporal=self.spec.temporal,
            upscale=self.spec.upscale,
            max_steps=max_steps,
        )

    def setup(self, look: Any) -> None:
        """Build every stage, check the whole chain with `look` (pipeline/live_chain.py: a
        GraphError before anything is set up), then set up and warm every stage at every rung
        (slow; before the first frame)."""
        t0 = time.perf_counter()
        spec = self.spec
        self._models = spec.load_models()
        step("live models loaded")
        d = getattr(self._preset, "diffusion", None)
        steps = d.steps if d is not None else 1
        top = spec.ladder[0].steps if spec.ladder else 1
        self.plan = self._plan(steps, max(top, steps))
        plan = self.plan
        rs = self.render_size
        if self._models is not None:
            from pipeline.diffusion import DiffusionStage

            variants = [
                DiffusionStage(
                    self._models,
                    self._preset,
                    rs[0],
                    rs[1],
                    device=spec.device,
                    dtype=spec.dtype,
                    stream_batch=spec.stream_batch,
                    max_steps=plan.max_steps,
                    cuda_graph=self.cuda and spec.cuda_graphs,
                    latent_scale=scale,
                    compile_unet=spec.compile_unet,
                    compile_cache=spec.compile_cache,
                )
                for scale in plan.latent_scales.values()
            ]
            self.diffusion = DiffusionLadder(variants, self._preset)
            self.stages.append(self.diffusion)
        if spec.temporal:
            from pipeline.temporal import TemporalStage

            self.temporal = TemporalLadder(
                TemporalStage.for_preset(
                    self._preset,
                    device=spec.device,
                    max_batch=1,
                    cuda_graph=self.cuda and spec.cuda_graphs and spec.temporal_graph,
                )
            )
            self.stages.append(self.temporal)
        sizes_vary = any(tuple(r.latent) != tuple(self.out_size) for r in plan.rungs)
        if spec.upscale > 1 or sizes_vary:
            self.vsr = VsrLadder.build(
                spec.make_upscaler if spec.upscale > 1 else None,
                plan.vsr_inputs,
                self.out_size,
                top_scale=spec.upscale,
                device=spec.device,
            )
            self.stages.append(self.vsr)
        start = min(max(0, spec.start_rung), len(plan.rungs) - 1)
        controller = QualityController(
            self.budget_ms, plan.rungs, start=start, **dict(spec.controller)
        )
        self.qc = QualityControl(
            controller, self.stages, device=spec.device, adaptive=spec.adaptive
        )
        self._timer = StageTimer(self.qc, self.cuda)
        check_live(look, self, self.out_size)
        # the rung the chain starts on, set up and warmed now; the others beside the first
        # frames (pipeline/ladder/prepare.py)
        first = self.qc.rung
        self._first = (tuple(first.latent), int(first.vsr_scale))
        beside = self.cuda if spec.paint_beside is None else bool(spec.paint_beside)
        paint_later = [self.diffusion] if beside and self.diffusion is not None else []
        for st in self.stages:
            if st in paint_later:
                st.painting = False  # the first frames pass it by (set up beside them)
                continue
            st.prepare([first], self.ctx)
            step(f"live {type(st).__name__} set up")
        self._warm(look.stylize, [self.qc.level])
        step("live chain warmed")
        freeze_setup_objects()  # no full garbage collection over the setup's objects later
        self.setup_s = time.perf_counter() - t0
        if paint_later or any(not self._on_first(r) for r in plan.rungs):
            # every rung, not only the lower ones: a frame between two rungs may meet the
            # upscaler at one rung's scale with the other rung's picture size (what is set up
            # already is skipped); the start rung's diffusion first, when it was left out

            def painting_ready() -> None:
                self.painting_after_s = time.perf_counter() - t0
                step("live diffusion set up beside the first frames")
                self._painting_ready.set()

            self._rest = LowerRungs(
                self.stages,
                plan.rungs,
                self.ctx,
                self.device,
                thread_name="kagura-live-ladder",
                first=[(st, [first]) for st in paint_later],
                on_first=painting_ready,
            )
            self._rest.start()
            # the first frames share the GPU with that set-up: their cost is not the start
            # rung's, and a step down now would make the frame thread wait for the set-up
            self.qc.hold(True)
        log.info(
            "live GPU chain ready in %.1f s: %s -> %s, budget %.2f ms, ladder:\n%s",
            self.setup_s,
            f"{rs[0]}x{rs[1]}",
            f"{self.out_size[0]}x{self.out_size[1]}",
            self.budget_ms,
            plan.describe(),
        )

    def _on_first(self, rung: Rung) -> bool:
        """Whether `rung` runs on what was set up before the first frame (the diffusion
        variant covers every step count; temporal is one stage)."""
        return (tuple(rung.latent), int(rung.vsr_scale)) == self._first

    def _first_rungs_only(self, plan: LadderPlan) -> LadderPlan:
        """`plan` with only the rungs that run on what was set up before the first frame."""
        keep = tuple(r for r in plan.rungs if self._on_first(r)) or plan.rungs[:1]
        return dataclasses.replace(plan, rungs=keep)

    def _start_painting(self) -> None:
        """Frame thread, before a frame is issued: once the start rung's diffusion is set up
        beside the first frames, the frames go through it; the temporal history of unpainted
        pictures is forgotten (it would blend them into the painted ones)."""
        d = self.diffusion
        if d is None or d.painting:
            return
        rest = self._rest
        if self._painting_ready.is_set():
            if not self._on_first(self.qc.rung) and rest is not None and not rest.done:
                return  # a preset's refit moved the rung to a variant still being set up
            d.start_painting()
            if self.temporal is not None:
                self.temporal.stage.reset()
        elif rest is None or rest.done:
            error = rest.error if rest is not None else None
            raise RuntimeError(f"the diffusion could not be set up: {error or 'not started'}")

    def _check_lower_rungs(self) -> None:
        """Frame thread, each frame while the lower rungs are set up: once that has ended, take
        its outcome; before, wait for it only when the ladder wants a rung it is setting up."""
        self._start_painting()
        rest = self._rest
        if rest is None:
            return
        if not rest.done:
            if self._on_first(self.qc.rung):
                return
            t0 = time.perf_counter()
            rest.wait()
            log.info(
                "quality: waited %.0f ms for the lower rungs' set-up",
                (time.perf_counter() - t0) * 1000,
            )
        self._end_lower_rungs(rest)

    def _end_lower_rungs(self, rest: LowerRungs) -> None:
        """Their set-up has ended: when it failed, the ladder goes on with the rungs that can
        run (one line for the user)."""
        self.qc.hold(False)
        if rest.error is None:
            self.ladder_ready_s = rest.seconds
        else:
            self._first_only = True
            self.plan = self._first_rungs_only(self.plan)
            keep = self.plan.rungs
            self.qc.retarget(keep, 0)
            self.spec.notices.append(
                f"quality ladder: the lower rungs could not be set up ({rest.error}); "
                f"running at {keep[0].name} only"
            )
        self._rest = None

    @property
    def ladder_pending(self) -> bool:
        """The lower rungs are still being set up."""
        rest = self._rest
        return rest is not None and not rest.done

    def wait_ladder(self, timeout: float | None = None) -> bool:
        """Until every rung can run (benchmarks that time the chain; tests). True if ready."""
        rest = self._rest
        return True if rest is None else rest.wait(timeout) and rest.ready

    def _warm(self, stylize: Any, levels: list[int]) -> None:
        """One frame through each of `levels` (the timers detached), then back to the start
        rung with fresh stream state."""
        timers = [st.timer for st in self.stages]
        for st in self.stages:
            st.timer = None
        w, h = self.render_size
        img = torch.zeros(h, w, 4, dtype=torch.uint8)
        img[..., 3] = 255
        motion = torch.zeros(h, w, 2)
        try:
            for i in levels:
                rung = self.plan.rungs[i]
                for st in self.stages:
                    st.apply(i, rung)
                f = Frame(0, i, AvatarParams(), image=img, motion=motion)
                wait_ready(self.chain.issue([f], self._chain_of(stylize)))
        finally:
            for st, t in zip(self.stages, timers, strict=True):
                st.timer = t
        level = self.qc.level
        for st in self.stages:
            st.apply(level, self.plan.rungs[level])
        if self.diffusion is not None:
            for v in self.diffusion.variants.values():
                v.reset()
            self.diffusion._prime_next = True
            self.diffusion._recent.clear()
        if self.temporal is not None:
            self.temporal.stage.reset()

    # -- frame thread ---------------------------------------------------------------------------

    def set_preset(self, preset: Any) -> None:
        """A new look's preset (frame thread): refit the ladder to its steps, new diffusion
        constants from the next frame."""
        self._preset = preset
        if self.temporal is not None:
            self.temporal.stage.use_preset(preset)
        if self.diffusion is None:
            return
        d = preset.diffusion
        plan = self._plan(d.steps, self.plan.max_steps)
        if self._first_only:  # the lower rungs could not be set up (_end_lower_rungs)
            plan = self._first_rungs_only(plan)
        if plan.rungs != self.plan.rungs:
            cur, level = self.qc.rung, self.qc.level
            same = [
                i
                for i, r in enumerate(plan.rungs)
                if (r.latent, r.temporal, r.vsr_scale) == (cur.latent, cur.temporal, cur.vsr_scale)
            ]
            fits = [i for i in same if plan.rungs[i].steps <= cur.steps]
            new = fits[0] if fits else same[0] if same else min(level, len(plan.rungs) - 1)
            log.info(
                "quality: ladder refitted for preset steps %d (rung %d -> %d)", d.steps, level, new
            )
            self.plan = plan
            self.qc.retarget(plan.rungs, new)
        self.diffusion.post(PresetChange(preset))

    def poll(self) -> None:
        self.qc.poll()

    def busy(self) -> bool:
        with self._lock:
            return self.in_flight >= self.max_in_flight

    def parts(self, stylize: Any) -> tuple:
        """What a frame runs through on the device, in order: upload, the look's `stylize`,
        the ladder stages (then `readback`; `submit` issues them all on the chain's stream)."""
        return (self.upload, stylize, *self.stages)

    def _chain_of(self, stylize: Any) -> tuple:
        """The whole chain a frame drawn by a look with `stylize` runs through."""
        return (*self.parts(stylize), self.readback)

    def submit(self, frame: Frame, stylize: Any) -> Frame:
        """Issue one rendered frame (CPU image + motion) through the chain (frame thread). On
        CUDA the returned frame is pending: its host image is valid once `finish` has returned
        it (publisher thread); on the CPU it is finished."""
        self.frames += 1
        self._check_lower_rungs()
        if self.cuda:
            with self._lock:
                self.in_flight += 1
        chain = self._chain_of(stylize)
        (out,) = self.chain.issue([frame], chain, timer=self._timer, timed=TIMED_BY_CHAIN)
        self.qc.observe(out)
        return out

    def finish(self, frame: Frame) -> Frame:
        """A submitted frame once its picture is on the host (publisher thread: sleeps until
        then); it no longer counts as in flight."""
        if frame.ready is None:
            return self._note_painted(frame)
        (done,) = wait_ready([frame])
        with self._lock:
            self.in_flight -= 1
        return self._note_painted(done)

    def _note_painted(self, frame: Frame) -> Frame:
        """The set-up's last time stamp: the first frame the diffusion painted, on the host."""
        if not self._first_painted_shown and frame.timings.get("diffusion.steps", 0) > 0:
            self._first_painted_shown = True
            step("live first painted frame ready")
        return frame

    # -- reporting ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        st = self.qc.status()
        st.update(
            device=self.spec.device,
            label=self.spec.label,
            ladder=[r.name for r in self.plan.rungs],
            merged=list(self.plan.merged),
            render_size=list(self.render_size),
            output_size=list(self.out_size),
            transition_frames=self.qc.transition_frames,
            held_frames=self.qc.held_frames,
            setup_s=round(self.setup_s, 2),
            lower_rungs_s=None if self.ladder_ready_s is None else round(self.ladder_ready_s, 2),
            painting_after_s=(
                None if self.painting_after_s is None else round(self.painting_after_s, 2)
            ),
            stream_batch_lag=self.diffusion.lag_frames if self.diffusion is not None else 0,
        )
        return st

    def stage_stats(self) -> dict[str, dict[str, float]]:
        return self.qc.stage_stats()

    def stage_values(self, name: str) -> list[float]:
        """A stage's ms per frame as measured (QualityControl), oldest first; call poll() after
        the frames have finished."""
        return self.qc.stage_values(name)

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()  # it may be setting up a stage closed below
        if self.cuda:
            torch.cuda.synchronize(self.device)
        for st in self.stages:
            try:
                st.close()
            except Exception:
                log.exception("live GPU chain: closing %s", st.name)
        self.stages = []
        self.closed = True
