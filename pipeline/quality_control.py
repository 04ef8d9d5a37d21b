"""The quality ladder wired into a running chain: measure, decide, send the rung upstream.

    plan = fit_ladder(DEFAULT_LADDER, render_size=(640, 360), diffusion=True, steps=2,
                      temporal=True, upscale=4)             # the rungs this chain can apply
    diff = DiffusionLadder([DiffusionStage(models, preset, 640, 360, latent_scale=s,
                                           max_steps=plan.max_steps)
                            for s in plan.latent_scales.values()], preset)
    temp = TemporalLadder(TemporalStage(device="cuda"))
    vsr  = VsrLadder.build(make_net, plan.vsr_inputs, (2560, 1440), top_scale=4)
                     # make_net(in_size, scale) -> UpscaleStage: pipeline.live_gpu.shared_upscalers
    qc   = QualityControl(QualityController(budget_ms, plan.rungs), [diff, temp, vsr])
    Graph(source, gives, [upload, stylize, diff, temp, vsr], sink).run(ctx, on_frame=qc.observe)

The three parts (DESIGN.md, "Rules that make it real-time", 4 and 6):

1. **Measure without synchronising.** Every ladder stage times its own work. On CUDA it records
   two CUDA events on its thread's current stream around each batch (`StageTimer`); nothing
   waits for them: `QualityControl.poll()` (called by `observe()`, or by the live loop every
   tick) reads them back with `event.query()` once the frame's last event has completed —
   usually a frame or two later — and only then feeds the controller, in frame order. On the
   CPU the stage's wall time (also stamped into `frame.timings[name]`) is the measurement.
   Stages that are not ladder stages can be counted too (`measure=`): on CUDA through a
   `Timed` wrapper (events), else through the wall time the graph stamps into
   `frame.timings`. In a Graph whose GPU stages run on several threads that share one CUDA
   stream, an event interval can also hold another stage's kernels queued in between (an
   overestimate); the live session (pipeline/live_gpu.py) issues the whole GPU chain from one
   thread, where the intervals are exact.
2. **Decide.** The frame's cost — the sum of the measured stages (default: the ladder stages)
   — goes into `pipeline.quality.QualityController` (P99 over a window against the budget;
   down one rung at once, up one rung with hysteresis; every change a `QosEvent` with its
   reason, logged on "kagura.quality"). Only frames that went through *every* ladder stage at
   the controller's current rung are fed (each stage stamps `frame.timings["<name>.rung"]`):
   frames still in flight from before a change say nothing about the new rung and are
   counted in `transition_frames` instead.
3. **Apply upstream, between frames, on the stage's own thread.** A change is posted as a
   `Control` message into each ladder stage's inbox (GStreamer's QoS event travelling
   upstream from where the time was measured); the stage takes its messages at the start of
   its next `process_batch`, on the thread that runs it — never concurrently with its work,
   and never a rebuild: every variant a rung can need was built, set up (CUDA graphs
   captured) and warmed before the first frame.

How each field of a `Rung` is applied (`fit_ladder` maps the ladder onto what the chain has):

* `steps` -> `DiffusionStage.set_preset()` with a copy of the preset's diffusion section whose
  `steps` is min(rung steps, preset steps). Every DiffusionStage is built with
  `max_steps = plan.max_steps`, so its CUDA graphs for every k <= max_steps exist already. A
  steps change re-primes the stream batch from the next frame (no blank frame).
* `latent` -> one DiffusionStage per latent size, all built at setup with
  `latent_scale = rung.latent[0] / ladder[0].latent[0]` (the ladder's sizes are read as scales
  of its top rung, so the same ladder fits any render size); a rung change switches the active
  instance (`reset()` first: its in-flight latents are stale) — a pointer swap.
  The picture after diffusion is then smaller; temporal works at that size (its history is
  reset by the size change) and `VsrLadder` brings every size to the one output size.
* `temporal` -> `TemporalStage.set_enabled()`: off drops the history and passes images through.
* `vsr_scale` -> `VsrLadder`: the output size stays constant (the chain's render size x its
  --upscale U). A rung at scale U runs exactly the offline render's upscaler
  (UpscaleStage(scale=U)) and, when the diffusion picture is smaller than the render size,
  resizes its result to the output size (bilinear). Lower scales must cost less, but
  realesr-animevideov3 is an x4 network whose x2 and x3 are the same x4 network followed by
  a bicubic downscale: asking UpscaleStage for scale 2 or 3 costs *more* than x4, not less.
  So a rung of scale s < U shrinks the picture to s/4 of its size first (antialiased
  bilinear), runs the x4 network and resizes its result (s x the diffusion picture) to the
  output size: the network sees (s/4)^2 of the pixels (x3: 56 %, x2: 25 %) and the picture
  holds the detail of an x s upscale. Scale 1 (no upscaler in the chain) is a plain bilinear
  resize to the output size. Every (input size, scale) pair a frame can arrive with — any
  diffusion size with any scale, since in a threaded Graph the two stages may switch a frame
  apart — has its UpscaleStage (one per distinct network input size; all share one set of
  weights; CUDA graph captured in setup) built at setup.

Fields the chain cannot apply are fitted away, not ignored silently: without diffusion
`steps` is 0 and `latent` is the render size on every rung; without temporal refinement
`temporal` is False everywhere; with `upscale=U` a rung's scale is min(its scale, U). Rungs
that become equal are merged (`LadderPlan.merged` lists them), so every rung change changes
something.

Not applied (said here rather than ignored): nothing else in `Rung`. The ladder does not
touch the idol render or the stylize post-process (CPU and GPU stages outside the ladder).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.frame import Frame
from pipeline.quality import DEFAULT_LADDER, QosEvent, QualityController, Rung
from pipeline.stage import BaseStage, Context, spec

__all__ = [
    "AUDIO_AGE",
    "Control",
    "DiffusionLadder",
    "LadderPlan",
    "LadderStage",
    "PresetChange",
    "QualityControl",
    "StageTimer",
    "TemporalLadder",
    "Timed",
    "VsrLadder",
    "fit_ladder",
    "resize_motion",
    "resize_rgba",
    "rung_name",
]

log = logging.getLogger("kagura.quality")

# frame.timings key: ms from the audio the picture's mouth was analysed from to the frame's
# pts (set by the live session; carried through the diffusion stream-batch lag here)
AUDIO_AGE = "audio_age"
RUNG_SUFFIX = ".rung"


# ---------------------------------------------------------------------------------------------
# fitting the ladder to the chain


def _work_size(size: tuple[int, int], scale: float) -> tuple[int, int]:
    """DiffusionStage's work size for `latent_scale` (multiples of 8, the autoencoder's)."""
    return (max(1, round(size[0] * scale / 8)) * 8, max(1, round(size[1] * scale / 8)) * 8)


def rung_name(steps: int, latent: tuple[int, int], temporal: bool, vsr: int) -> str:
    size = f"{latent[0]}x{latent[1]}"
    parts = [f"{steps} step{'s' if steps != 1 else ''} {size}" if steps else f"render {size}"]
    if temporal:
        parts.append("temporal")
    if vsr > 1:
        parts.append(f"vsr x{vsr}")
    return " ".join(parts)


@dataclass(frozen=True)
class LadderPlan:
    """A ladder fitted to one chain.

    rungs           the fitted rungs (best first); `latent` is the actual diffusion work size
    latent_scales   work size -> latent_scale of the DiffusionStage that paints at that size
    vsr_inputs      every (width, height, scale) a VsrLadder may receive
    max_steps       what every DiffusionStage is built for (the top rung's steps, >= 1)
    merged          names of the original rungs that fitted onto the same settings as the rung
                    before them (nothing to apply, so no rung of their own)
    """

    rungs: tuple[Rung, ...]
    latent_scales: dict[tuple[int, int], float]
    vsr_inputs: frozenset[tuple[int, int, int]]
    max_steps: int
    merged: tuple[str, ...] = ()

    def describe(self) -> str:
        lines = [f"{i}: {r.name}" for i, r in enumerate(self.rungs)]
        if self.merged:
            lines.append("merged (nothing to change on this chain): " + "; ".join(self.merged))
        return "\n".join(lines)


def fit_ladder(
    ladder: Sequence[Rung] = DEFAULT_LADDER,
    *,
    render_size: tuple[int, int],
    diffusion: bool,
    steps: int = 8,
    temporal: bool,
    upscale: int,
    max_steps: int | None = None,
) -> LadderPlan:
    """Map `ladder` onto a chain (see the module doc for each field).

    render_size  the size the idol is rendered at (the diffusion input)
    steps        the preset's diffusion steps: a rung runs min(rung steps, steps)
    max_steps    what the DiffusionStages are built for (default: the fitted top rung's steps);
                 pass more to let a later preset with more steps run them
    upscale      the chain's top super-resolution factor (1: no upscaler)
    """
    if not ladder:
        raise ValueError("the ladder needs at least one rung")
    if upscale < 1:
        raise ValueError(f"upscale must be >= 1, got {upscale}")
    top = ladder[0]
    rungs: list[Rung] = []
    merged: list[str] = []
    scales: dict[tuple[int, int], float] = {}
    seen: set[tuple] = set()
    for r in ladder:
        if diffusion:
            k = max(1, min(r.steps, steps))
            s = r.latent[0] / top.latent[0]
            latent = _work_size(render_size, s)
            scales.setdefault(latent, s)
        else:
            k, latent = 0, tuple(render_size)
        t = bool(r.temporal and temporal)
        v = max(1, min(r.vsr_scale, upscale))
        key = (k, latent, t, v)
        if key in seen:
            merged.append(r.name)
            continue
        seen.add(key)
        rungs.append(Rung(rung_name(k, latent, t, v), k, latent, t, v))
    work = {r.latent for r in rungs}
    vsr = frozenset((w, h, r.vsr_scale) for r in rungs for (w, h) in work)
    top_steps = max(r.steps for r in rungs)
    ms = max(1, top_steps if max_steps is None else max(max_steps, top_steps))
    return LadderPlan(tuple(rungs), scales, vsr, ms, tuple(merged))


# ---------------------------------------------------------------------------------------------
# messages


@dataclass(frozen=True)
class Control:
    """Apply rung `level` (`rung`) from the next batch on. `event`: the QosEvent that caused
    it (None: the initial rung, or a ladder refit)."""

    level: int
    rung: Rung
    event: QosEvent | None = None


@dataclass(frozen=True)
class PresetChange:
    """A new diffusion section (prompt, strength, steps, seed, guidance) for the next frame."""

    diffusion: Any


# ---------------------------------------------------------------------------------------------
# timing


class StageTimer:
    """Times a stage's batches: CUDA events on the current stream (device "cuda"; read back
    later, never waited for) or nothing (CPU: the wall time stamped by the stage is used)."""

    def __init__(self, owner: QualityControl, cuda: bool):
        self.owner, self.cuda = owner, cuda

    def begin(self) -> Any:
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def end(self, name: str, token: Any, indices: Sequence[int]) -> None:
        if token is None:
            return
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.owner.record(name, indices, token, ev)


class LadderStage(BaseStage):
    """A stage the quality ladder controls: an inbox of control messages, drained at the start
    of each batch on the stage's own thread; times its work (see StageTimer); stamps each
    frame with its wall ms (`timings[name]`), the rung it ran at (`timings[name + ".rung"]`)
    and what it applied (`stamps()`: "diffusion.steps", "temporal.on", "upscale.scale")."""

    def __init__(self) -> None:
        self._inbox: collections.deque = collections.deque()  # append/popleft: thread-safe
        self.level = 0
        self.rung: Rung | None = None
        self.timer: StageTimer | None = None
        self.applied: list[tuple[int, int]] = []  # (first frame index, level) per change

    # -- messages -----------------------------------------------------------------------------

    def post(self, message: Any) -> None:
        """Queue a message (any thread); it takes effect before the stage's next batch."""
        self._inbox.append(message)

    def drain(self, next_index: int | None = None) -> None:
        while True:
            try:
                msg = self._inbox.popleft()
            except IndexError:
                return
            if isinstance(msg, Control):
                self.apply(msg.level, msg.rung)
                self.applied.append((-1 if next_index is None else next_index, msg.level))
            else:
                self.handle(msg)

    def apply(self, level: int, rung: Rung) -> None:
        """Switch to `rung` (called on the stage's thread, between batches)."""
        self.level, self.rung = level, rung

    def handle(self, message: Any) -> None:
        """Messages other than Control (subclasses)."""

    def stamps(self) -> dict[str, float]:
        """What the stage applied, stamped into each frame's timings ("<name>.<what>")."""
        return {}

    # -- work -----------------------------------------------------------------------------------

    def run(self, frames: list[Frame]) -> list[Frame]:
        raise NotImplementedError

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        self.drain(frames[0].index if frames else None)
        timer = self.timer
        token = timer.begin() if timer is not None else None
        t0 = time.perf_counter()
        out = self.run(frames)
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(frames))
        if timer is not None:
            timer.end(self.name, token, [f.index for f in out])
        extra = {self.name: ms, self.name + RUNG_SUFFIX: float(self.level), **self.stamps()}
        return [f.with_(timings={**f.timings, **extra}) for f in out]


class Timed(BaseStage):
    """Any stage, timed with CUDA events (on CUDA) so QualityControl can count it."""

    def __init__(self, stage: Any):
        self.stage = stage
        self.name = stage.name
        self.needs, self.gives = stage.needs, stage.gives
        self.max_batch = getattr(stage, "max_batch", 1)
        self.timer: StageTimer | None = None

    def setup(self, ctx: Context) -> None:
        self.stage.setup(ctx)

    def close(self) -> None:
        self.stage.close()

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        token = self.timer.begin() if self.timer is not None else None
        out = self.stage.process_batch(frames)
        if self.timer is not None:
            self.timer.end(self.name, token, [f.index for f in out])
        return out


# ---------------------------------------------------------------------------------------------
# the ladder stages


def _with_steps(d: Any, k: int) -> Any:
    """A copy of a diffusion section with `steps` = k (pydantic model or dataclass)."""
    if getattr(d, "steps", None) == k:
        return d
    if hasattr(d, "model_copy"):
        return d.model_copy(update={"steps": k})
    import dataclasses

    return dataclasses.replace(d, steps=k)


def _diffusion_section(preset: Any) -> Any:
    return getattr(preset, "diffusion", preset)


class DiffusionLadder(LadderStage):
    """Diffusion at the rung's latent size and steps: one DiffusionStage per latent size (all
    built and set up before the first frame), switched by pointer between frames.

    `variants`: DiffusionStages with the same input size (the render size) and different work
    sizes, all with max_steps >= the top rung's steps. The output image has the active
    variant's work size. `timings[AUDIO_AGE]` of an output frame is moved to the frame whose
    picture it shows (the stream batch lags by `lag_frames`).
    """

    name = "diffusion"
    max_batch = 1

    def __init__(self, variants: Sequence[Any], preset: Any):
        super().__init__()
        if not variants:
            raise ValueError("diffusion ladder: needs at least one DiffusionStage")
        self.variants = {v.work_size: v for v in variants}
        if len(self.variants) != len(variants):
            raise ValueError("diffusion ladder: two variants with the same work size")
        ins = {tuple(v.in_size) for v in variants}
        if len(ins) != 1:
            raise ValueError(f"diffusion ladder: variants take different input sizes {ins}")
        self.in_size = ins.pop()
        dev = variants[0].device.type
        self.needs = spec("image", size=self.in_size)
        self.gives = spec("image", device=dev)  # size: the active rung's work size
        self._diffusion = _diffusion_section(preset)
        self.active = variants[0]
        self._current: dict[tuple[int, int], Any] = {}  # work size -> section applied there
        self._recent: collections.deque = collections.deque(maxlen=16)  # (index, pts, age)
        self._prime_next = True  # the next frame starts a stream (no lag before it)
        self._prime_index = 0
        self.switches = 0

    @property
    def lag_frames(self) -> int:
        return self.active.lag_frames

    @property
    def steps(self) -> int:
        return self.active.steps

    def stamps(self) -> dict[str, float]:
        return {"diffusion.steps": float(self.active.steps)}

    def setup(self, ctx: Context) -> None:
        for v in self.variants.values():
            if not getattr(v, "setup_done", False):
                v.setup(ctx)

    def close(self) -> None:
        for v in self.variants.values():
            v.close()

    def _target_section(self, rung: Rung | None, stage: Any) -> Any:
        d = self._diffusion
        k = d.steps if rung is None or rung.steps <= 0 else min(rung.steps, d.steps)
        if k > stage.max_steps:
            log.warning(
                "diffusion: the preset wants %d steps, the stages were built for at most %d "
                "(max_steps); running %d",
                k,
                stage.max_steps,
                stage.max_steps,
            )
            k = stage.max_steps
        return _with_steps(d, max(1, k))

    def _activate(self, stage: Any, rung: Rung | None) -> None:
        want = self._target_section(rung, stage)
        had = self._current.get(stage.work_size)
        if stage is not self.active:
            self.switches += 1
            if had != want:
                stage.set_preset(want)
            stage.reset()  # its in-flight latents are from its last turn: prime afresh
            self._prime_next = True
        elif had != want:
            if had is None or (had.steps, had.strength, had.seed) != (
                want.steps,
                want.strength,
                want.seed,
            ):
                self._prime_next = True
            stage.set_preset(want)
        self._current[stage.work_size] = want
        self.active = stage

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        stage = self.variants.get(tuple(rung.latent))
        if stage is None:
            raise ValueError(
                f"diffusion ladder: no stage built for latent {rung.latent[0]}x{rung.latent[1]} "
                f"(built: {', '.join(f'{w}x{h}' for w, h in self.variants)})"
            )
        self._activate(stage, rung)

    def handle(self, message: Any) -> None:
        if isinstance(message, PresetChange):
            self._diffusion = _diffusion_section(message.diffusion)
            self._activate(self.active, self.rung)

    def set_preset(self, preset: Any) -> None:
        """On the stage's thread: a new preset's diffusion section, from the next frame."""
        self.handle(PresetChange(preset))

    def run(self, frames: list[Frame]) -> list[Frame]:
        out = []
        for f in frames:
            if self._prime_next:
                self._prime_index, self._prime_next = f.index, False
            self._recent.append((f.index, f.pts_ns, f.timings.get(AUDIO_AGE)))
            src = (int(f.image.shape[1]), int(f.image.shape[0])) if f.image is not None else None
            work = tuple(self.active.work_size)
            if f.motion is not None and src is not None and src != work:
                # resized here, not by DiffusionStage._motion: that builds its scale factors as
                # a new device tensor from a Python list — a blocking host-to-device copy that
                # would make the frame thread wait for the GPU on every smaller-latent frame
                g = self.active.process(f.with_(motion=None))
                g = g.with_(motion=resize_motion(f.motion, src, work))
            else:
                g = self.active.process(f)
            lag = self.active.lag_frames
            if lag and g.timings.get(AUDIO_AGE) is not None:
                src = max(f.index - lag, self._prime_index)
                for idx, pts, age in reversed(self._recent):
                    if idx == src and age is not None:
                        g = g.timed(AUDIO_AGE, (f.pts_ns - pts) / 1e6 + age)
                        break
            out.append(g)
        return out


class TemporalLadder(LadderStage):
    """Temporal refinement switched on/off by the rung (TemporalStage.set_enabled)."""

    name = "temporal"

    def __init__(self, stage: Any):
        super().__init__()
        self.stage = stage
        self.needs, self.gives = stage.needs, stage.gives
        self.max_batch = stage.max_batch

    def setup(self, ctx: Context) -> None:
        self.stage.setup(ctx)

    def close(self) -> None:
        self.stage.close()

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        if bool(rung.temporal) != self.stage.enabled:
            self.stage.set_enabled(bool(rung.temporal))

    def stamps(self) -> dict[str, float]:
        return {"temporal.on": float(self.stage.enabled)}

    def run(self, frames: list[Frame]) -> list[Frame]:
        return self.stage.process_batch(frames)


def resize_motion(
    motion: torch.Tensor, src: tuple[int, int], size: tuple[int, int]
) -> torch.Tensor:
    """float (H, W, 2) motion in pixels of a `src` (w, h) picture -> (h', w', 2) for `size`:
    bilinear, the vectors scaled by the size ratio (as DiffusionStage does), no host sync."""
    w, h = size
    m = motion.permute(2, 0, 1)[None].float()
    m = F.interpolate(m, size=(h, w), mode="bilinear", align_corners=False)[0]
    m[0].mul_(w / src[0])
    m[1].mul_(h / src[1])
    return m.permute(1, 2, 0).contiguous()


def resize_rgba(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 (H, W, 4) premultiplied -> uint8 (h, w, 4) at `size` = (w, h), bilinear
    (antialiased when shrinking). Bilinear weights are non-negative, so 0 <= rgb <= alpha
    survives (and rounding is monotone)."""
    w, h = size
    if (image.shape[1], image.shape[0]) == (w, h):
        return image
    x = image.permute(2, 0, 1)[None].float()
    shrink = w < image.shape[1] or h < image.shape[0]
    y = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)
    return y[0].round_().clamp_(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()


@dataclass
class _Vsr:
    shrink_to: tuple[int, int] | None  # the network's input size, when smaller than the input
    net: Any  # an UpscaleStage (or None: resize only)
    out_size: tuple[int, int]

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        x = image
        if self.shrink_to is not None:
            x = resize_rgba(x, self.shrink_to)
        if self.net is not None:
            x = self.net.apply(x[None])[0]
        return resize_rgba(x, self.out_size)


class VsrLadder(LadderStage):
    """Super-resolution at the rung's scale to ONE output size (see the module doc).

    `variants`: (in width, in height, scale) -> _Vsr. Build with `VsrLadder.build`."""

    name = "upscale"
    max_batch = 1

    def __init__(self, variants: dict[tuple[int, int, int], _Vsr], out_size, device: str):
        super().__init__()
        self.variants = variants
        self.out_size = (int(out_size[0]), int(out_size[1]))
        self.scale = max(k[2] for k in variants)
        self.needs = spec("image")
        self.gives = spec("image", size=self.out_size, device=torch.device(device).type)
        self.nets = list(
            {id(v.net): v.net for v in variants.values() if v.net is not None}.values()
        )

    @classmethod
    def build(
        cls,
        make_net: Callable[[tuple[int, int], int], Any] | None,
        inputs: Iterable[tuple[int, int, int]],
        out_size: tuple[int, int],
        *,
        net_scale: int = 4,
        top_scale: int | None = None,
        device: str = "cpu",
    ) -> VsrLadder:
        """`make_net(in_size, scale)` -> an UpscaleStage for that input size and scale (None:
        no upscaler; every scale must then be 1). `inputs` = LadderPlan.vsr_inputs.

        The top scale (default: the largest in `inputs`, the chain's --upscale) runs exactly
        the upscaler the offline render uses, UpscaleStage(scale=top) on the whole picture.
        A lower scale s runs the network at its own scale `net_scale` on the picture shrunk to
        s / net_scale (cheaper: fewer pixels through the network). Stages are shared between
        keys with the same network input size and scale."""
        inputs = set(inputs)
        top = top_scale if top_scale is not None else max(k[2] for k in inputs)
        nets: dict[tuple[int, int, int], Any] = {}
        variants: dict[tuple[int, int, int], _Vsr] = {}
        for w, h, s in sorted(inputs, key=lambda k: (-k[2], -k[0])):
            if s <= 1:
                variants[(w, h, s)] = _Vsr(None, None, tuple(out_size))
                continue
            if make_net is None:
                raise ValueError(f"vsr ladder: scale {s} needs an upscaler (make_net is None)")
            if s >= top or s >= net_scale:
                net_in, k = (w, h), s
            else:
                net_in = (max(1, round(w * s / net_scale)), max(1, round(h * s / net_scale)))
                k = net_scale
            net = nets.get((*net_in, k))
            if net is None:
                net = nets[(*net_in, k)] = make_net(net_in, k)
            variants[(w, h, s)] = _Vsr(net_in if net_in != (w, h) else None, net, tuple(out_size))
        return cls(variants, out_size, device)

    def setup(self, ctx: Context) -> None:
        for net in self.nets:
            net.setup(ctx)

    def close(self) -> None:
        for net in self.nets:
            net.close()

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        self.scale = int(rung.vsr_scale)

    def stamps(self) -> dict[str, float]:
        return {"upscale.scale": float(self.scale)}

    def run(self, frames: list[Frame]) -> list[Frame]:
        out = []
        for f in frames:
            img = f.image
            if img is None:
                raise ValueError(f"upscale: frame {f.index} has no image")
            key = (int(img.shape[1]), int(img.shape[0]), self.scale)
            v = self.variants.get(key)
            if v is None:  # never built on the hot path: a plan/chain mismatch is a bug
                raise ValueError(
                    f"upscale: nothing built for a {key[0]}x{key[1]} picture at x{key[2]} "
                    f"(built: {sorted(self.variants)})"
                )
            out.append(f.with_(image=v.apply(img), motion=None))
        return out


# ---------------------------------------------------------------------------------------------
# the control loop


def _stats(values: Iterable[float]) -> dict[str, float] | None:
    a = np.fromiter(values, float)
    if a.size == 0:
        return None
    return {
        "median": round(float(np.median(a)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "n": int(a.size),
    }


@dataclass
class _Pending:
    index: int
    pts_ns: int
    levels: dict[str, float]
    wall: dict[str, float]
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
        self._stage_ms: dict[str, collections.deque[float]] = {}
        self._cost: collections.deque[float] = collections.deque(maxlen=history)
        self._history = history
        self.fed = 0
        self.transition_frames = 0
        # every change, with the rung names at the time (a refit renumbers the ladder)
        self.changes: list[dict[str, Any]] = []
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

    def stage_stats(self) -> dict[str, dict[str, float]]:
        """Per stage: median / P99 ms (CUDA-event time on CUDA, else wall), over the history."""
        with self._lock:
            items = {k: list(v) for k, v in self._stage_ms.items()}
            costs = list(self._cost)
        out = {k: s for k, v in items.items() if (s := _stats(v)) is not None}
        cost = _stats(costs)
        if cost is not None:
            out["ladder total"] = cost
        return out

    def status(self) -> dict[str, Any]:
        """For the stats overlay and the logs: the rung and the last change."""
        c = self.controller
        try:
            p99 = c.p99()
        except RuntimeError:  # its window changed under us (another thread feeds it)
            p99 = None
        return {
            "adaptive": self.adaptive,
            "level": c.level,
            "rungs": len(c.ladder),
            "rung": c.rung.name,
            "budget_ms": round(c.budget_ms, 2),
            "p99_ms": None if p99 is None else round(p99, 2),
            "changes": len(self.changes),
            "last_event": dict(self.changes[-1]) if self.changes else None,
        }

    # -- measurement ------------------------------------------------------------------------------

    def record(self, name: str, indices: Sequence[int], start: Any, end: Any) -> None:
        """A stage's event pair around a batch of frames (called on the stage's thread)."""
        n = max(1, len(indices))
        with self._lock:
            for i in indices:
                self._events.setdefault(i, []).append((name, start, end, n))

    def observe(self, frame: Frame) -> list[QosEvent]:
        levels = {s.name: frame.timings.get(s.name + RUNG_SUFFIX, -1.0) for s in self.ladder_stages}
        # stage wall times only: "<stage>.<what>" keys are what a stage applied, not times
        wall = {k: float(v) for k, v in frame.timings.items() if "." not in k and k != AUDIO_AGE}
        with self._lock:
            self._order.append(_Pending(frame.index, frame.pts_ns, levels, wall))
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
        with self._lock:
            for k, v in ms.items():
                d = self._stage_ms.get(k)
                if d is None:
                    d = self._stage_ms[k] = collections.deque(maxlen=self._history)
                d.append(v)
            cost = sum(ms.get(k, 0.0) for k in self.measure)
            self._cost.append(cost)
        c = self.controller
        if any(int(v) != c.level for v in p.levels.values()):
            self.transition_frames += 1  # made (partly) at another rung: says nothing here
            return None
        if not self.adaptive:
            return None
        self.fed += 1
        ev = c.feed(cost, p.pts_ns)
        if ev is not None:
            self._broadcast(ev)
        return ev

    def _broadcast(self, ev: QosEvent) -> None:
        ladder = self.controller.ladder
        rung = ladder[ev.to_rung]
        self.changes.append(
            {
                "t": time.monotonic(),
                "pts_ns": ev.pts_ns,
                "from_rung": ev.from_rung,
                "to_rung": ev.to_rung,
                "from": ladder[ev.from_rung].name,
                "to": rung.name,
                "direction": "down" if ev.to_rung > ev.from_rung else "up",
                "reason": ev.reason,
            }
        )
        for s in self.ladder_stages:
            s.post(Control(ev.to_rung, rung, ev))
        if self.on_event is not None:
            try:
                self.on_event(ev)
            except Exception:
                log.exception("quality: on_event callback failed")

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
        self.controller = new
        for s in self.ladder_stages:
            s.post(Control(level, new.ladder[level], None))
