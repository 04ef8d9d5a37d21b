"""The quality ladder wired into a running chain: measure, decide, send the rung upstream.

    plan.py      fit_ladder / LadderPlan: the rungs this chain can apply
    stage.py     Control / PresetChange messages, StageTimer, LadderStage, Timed
    rungs.py     DiffusionLadder, TemporalLadder, VsrLadder (and resize_rgba / resize_motion)
    control.py   QualityControl: reads the timings, feeds the controller, posts the changes

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

The three parts (docs/ARCHITECTURE.md, "Real-time rules", 4 and 6):

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

from pipeline.ladder.control import QualityControl
from pipeline.ladder.plan import LadderPlan, fit_ladder, rung_name
from pipeline.ladder.rungs import (
    DiffusionLadder,
    TemporalLadder,
    VsrLadder,
    resize_motion,
    resize_rgba,
)
from pipeline.ladder.stage import (
    AUDIO_AGE,
    Control,
    LadderStage,
    PresetChange,
    StageTimer,
    Timed,
)

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
