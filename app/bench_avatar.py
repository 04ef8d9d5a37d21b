"""`kagura bench render --avatar FILE`: an imported avatar's render speed against the idol's.

Both avatars draw the same params (the demo song's lip sync and motion, first `--seconds`)
at `--size` on the CPU, one after the other in this one process, alternating in blocks so that
a busy machine slows both alike. Reported: frames/s of the whole render (image + motion
vectors), per-frame median / P99, and the late mouth (render_base + redraw_mouth, as live
frames are drawn). Goal: the imported avatar draws at least as many frames/s as the idol.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from app.config import parse_size
from core.benchdoc import machine_line, today, write_section
from core.stats import median_p99

BLOCK = 25  # frames per block; sources alternate block by block


def _track(seconds: float, fps: int):
    from audio.analysis import analyze_clip
    from audio.decode import decode_audio
    from audio.demo_song import demo_song_path

    clip = decode_audio(demo_song_path(), seconds=seconds)
    return analyze_clip(clip, fps)


def _stats(ms: list[float]) -> tuple[float, float, float]:
    a = np.asarray(ms)
    return 1000.0 / a.mean(), *median_p99(a)


def bench_avatar(args: argparse.Namespace) -> int:
    from presets.loader import load_preset
    from render.avatar_source import BUILTIN, avatar_spec

    width, height = parse_size(args.size)
    preset = load_preset((args.presets or ["studio"])[0])
    t0 = time.perf_counter()
    spec = avatar_spec(args.avatar)  # reads and checks the file
    doc = spec.doc()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sources = {
        "built-in idol": BUILTIN.make_renderer(width, height, preset.palette, preset.line),
    }
    built_idol = time.perf_counter() - t0
    t0 = time.perf_counter()
    sources[spec.label()] = spec.make_renderer(width, height, preset.palette, preset.line)
    prep_s = time.perf_counter() - t0
    load_avg = os.getloadavg()[0]  # a shared machine slows both sources; the ratio holds
    track = _track(args.seconds, args.fps)
    n = len(track)
    params = [track[i] for i in range(n)]
    full = {k: [] for k in sources}
    late = {k: [] for k in sources}
    for r in sources.values():  # warm up: first-frame allocations, Skia caches
        r.render(params[0])
        r.reset()
    print(f"bench render --avatar: {n} frames x {len(sources)} sources …", file=sys.stderr)
    for b0 in range(0, n, BLOCK):
        for name, r in sources.items():
            for p in params[b0 : b0 + BLOCK]:
                t = time.perf_counter()
                r.render(p)
                full[name].append((time.perf_counter() - t) * 1000.0)
    for r in sources.values():
        r.reset()
    for b0 in range(0, n, BLOCK):
        for name, r in sources.items():
            for p in params[b0 : b0 + BLOCK]:
                t = time.perf_counter()
                out = r.render_base(p)
                r.redraw_mouth(out.rgba, p)
                late[name].append((time.perf_counter() - t) * 1000.0)
    cmdline = (
        f"kagura bench render --avatar {args.avatar} --size {args.size} --fps {args.fps} "
        f"--seconds {args.seconds:g}"
    )
    lines = [
        "## Imported avatar render speed (CPU, one process)",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}; load average {load_avg:.1f} at the start",
        f"- command: `{cmdline}`",
        f"- avatar: {spec.label()}, canvas {doc.width}x{doc.height}, {len(doc.layers)} layers; "
        f"load {load_s:.2f} s, resampled to the frame in {prep_s:.2f} s "
        f"(the idol's renderer: {built_idol:.2f} s)",
        f"- input: the demo song's params, first {args.seconds:g} s ({n} frames), "
        f"{width}x{height}; the two sources alternate every {BLOCK} frames",
        "- goal: the imported avatar renders at ≥ the built-in idol's frames/s",
        "",
        "| source | render fps | render median / P99 (ms) | base + late mouth median / P99 (ms) |",
        "|---|---|---|---|",
    ]
    fps, medians = {}, {}
    for name in sources:
        f, med, p99 = _stats(full[name])
        _, lmed, lp99 = _stats(late[name])
        fps[name], medians[name] = f, med
        lines.append(f"| {name} | {f:.1f} | {med:.2f} / {p99:.2f} | {lmed:.2f} / {lp99:.2f} |")
    ratio = fps[spec.label()] / fps["built-in idol"]
    by_median = medians["built-in idol"] / medians[spec.label()]
    lines += [
        "",
        f"Imported / built-in frames/s: {ratio:.2f} "
        f"({'meets' if ratio >= 1.0 else 'misses'} the goal); from the medians (less swayed by "
        f"a busy machine's stalls): {by_median:.2f}. Render = image + motion vectors.",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(args.out, f"avatar:{Path(args.avatar).stem}", body)
        print(f"bench render --avatar: updated {args.out}", file=sys.stderr)
    return 0
