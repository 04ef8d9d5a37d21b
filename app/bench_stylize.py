"""`kagura bench stylize`: the preset post-process alone, on real idol frames, CPU or CUDA.

On CUDA the stage's time is taken with CUDA events around each batch (no synchronize inside
the timed region); host↔device copies through pinned memory are timed the same way, apart.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from app.config import parse_size
from core.avatar import AvatarParams
from core.benchdoc import machine_line, today, write_section
from core.stage import Context
from core.stats import median_p99

BATCH = 4


def idol_frames(width: int, height: int, n: int, preset) -> torch.Tensor:
    """n frames of the idol singing and moving its head, uint8 (n, H, W, 4) premultiplied."""
    from render.idol import IdolRenderer

    renderer = IdolRenderer(width, height, preset.palette, preset.line)
    frames = []
    for i in range(n):
        t = i / 30
        vowels = np.zeros(6, np.float32)
        vowels[i // 6 % 5] = 1.0
        params = AvatarParams(
            pts_ns=int(t * 1e9),
            head_yaw=12 * np.sin(t * 2.1),
            head_roll=6 * np.sin(t * 1.3),
            body_roll=3 * np.sin(t * 0.9),
            mouth_open=0.5 + 0.5 * np.sin(t * 9),
            vowels=vowels,
        )
        frames.append(torch.from_numpy(renderer.render(params).rgba))
    return torch.stack(frames)


def time_stage(stage, frames: torch.Tensor, device: str, repeats: int) -> tuple[float, float]:
    """Median and P99 of ms per frame over `repeats` passes through all frames in batches."""
    per_frame: list[float] = []
    idx = torch.arange(frames.shape[0])
    if device == "cuda":
        pairs = []
        for _ in range(repeats):
            for i in range(0, frames.shape[0], BATCH):
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                stage.apply(frames[i : i + BATCH], idx[i : i + BATCH])
                end.record()
                pairs.append((start, end))
        torch.cuda.synchronize()  # once, after the timed region
        per_frame = [s.elapsed_time(e) / BATCH for s, e in pairs]
    else:
        import time

        for _ in range(repeats):
            for i in range(0, frames.shape[0], BATCH):
                t0 = time.perf_counter()
                stage.apply(frames[i : i + BATCH], idx[i : i + BATCH])
                per_frame.append((time.perf_counter() - t0) * 1e3 / BATCH)
    return median_p99(per_frame)


def time_copies(frames: torch.Tensor) -> tuple[tuple[float, float], tuple[float, float]]:
    """Upload (pinned host → device) and readback (device → pinned host), ms per batch of 4."""
    host = frames[:BATCH].pin_memory()
    dev = host.to("cuda")
    back = torch.empty_like(host).pin_memory()
    up_ms, down_ms = [], []
    for _ in range(50):
        e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        e[0].record()
        dev.copy_(host, non_blocking=True)
        e[1].record()
        back.copy_(dev, non_blocking=True)
        e[2].record()
        up_ms.append((e[0], e[1]))
        down_ms.append((e[1], e[2]))
    torch.cuda.synchronize()
    return median_p99([a.elapsed_time(b) for a, b in up_ms]), median_p99(
        [a.elapsed_time(b) for a, b in down_ms]
    )


def bench_stylize(args: argparse.Namespace) -> int:
    from pipeline.stylize import StylizeStage
    from presets.loader import list_presets

    width, height = parse_size(args.size)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("bench stylize: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    if device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    presets = [p.preset for p in list_presets() if p.source == "built-in"]
    rows = []
    for preset in presets:
        frames = idol_frames(width, height, args.frames, preset)
        if device == "cuda":
            frames = frames.pin_memory().to("cuda")
        for transparent in (False, True):
            stage = StylizeStage(preset, width, height, transparent=transparent)
            stage.setup(Context(width, height, 30, 48000, extras={"device": device}))
            stage.apply(frames[:BATCH])  # constants moved to the device, first-call costs paid
            med, p99 = time_stage(stage, frames, device, args.repeats)
            rows.append((preset.name, "transparent" if transparent else "opaque", med, p99))
            print(
                f"{preset.name:10} {rows[-1][1]:11} median {med:7.2f}  P99 {p99:7.2f} ms/frame",
                file=sys.stderr,
            )

    threads = f", {torch.get_num_threads()} torch thread(s)" if device == "cpu" else ""
    gpu = f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""
    cmd = f"kagura bench stylize --device {device} --size {args.size} --frames {args.frames} --repeats {args.repeats}"
    if device == "cpu" and args.threads:
        cmd += f" --threads {args.threads}"
    lines = [
        f"## Stylize stage alone, {device}{gpu}",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}{threads}",
        f"- command: `{cmd}`",
        f"- input: {args.frames} rendered idol frames at {width}x{height} (head and mouth moving), batches of {BATCH}; "
        + ("CUDA events around each batch" if device == "cuda" else "wall clock around each batch"),
        "",
        "| preset | mode | median ms/frame | P99 ms/frame |",
        "|---|---|---|---|",
        *[f"| {n} | {m} | {a:.2f} | {b:.2f} |" for n, m, a, b in rows],
    ]
    if device == "cuda":
        (um, up99), (dm, dp99) = time_copies(frames.cpu())
        lines += [
            "",
            f"Copies of a batch of {BATCH} uint8 RGBA frames through pinned memory: upload median {um:.3f} / "
            f"P99 {up99:.3f} ms, readback median {dm:.3f} / P99 {dp99:.3f} ms.",
        ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(args.out, f"stylize-{device}", body)
    return 0
