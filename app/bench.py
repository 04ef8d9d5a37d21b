"""`kagura bench render`: offline render speed per preset, each preset in its own process.

A process per preset gives each its own peak memory (ru_maxrss) and a cold start like a user's.
The figure that matters is end-to-end frames/s (decode + analysis excluded, reported apart):
stages run in parallel threads, so per-stage times overlap and do not add up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from app.config import parse_size
from core.benchdoc import machine_line, today, write_section

GOAL_FPS = 30.0


def bench_render(args: argparse.Namespace) -> int:
    from presets.loader import list_presets

    width, height = parse_size(args.size)
    names = args.presets or [p.name for p in list_presets() if p.source == "built-in"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = Path(tmp) / f"{name}.mp4"
            cmd = [
                sys.executable,
                "-m",
                "app.bench_worker",
                name,
                str(out),
                str(width),
                str(height),
                str(args.fps),
                str(args.seconds),
            ]
            print(f"bench render: {name} …", file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                raise RuntimeError(
                    f"bench worker for preset {name!r} failed (exit {done.returncode})"
                )
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))

    cmdline = "kagura bench render " + " ".join(
        [f"--size {args.size}", f"--fps {args.fps}", f"--seconds {args.seconds:g}"]
        + ([f"--presets {' '.join(args.presets)}"] if args.presets else [])
    )
    lines = [
        "## Offline render speed (CPU)",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}",
        f"- command: `{cmdline}`",
        f"- input: the built-in demo song, first {args.seconds:g} s; output H.264+AAC MP4, {width}x{height} @ {args.fps} fps",
        f"- goal: ≥ {GOAL_FPS:g} frames/s for every procedural preset (faster than real time at 30 fps)",
        "",
        "| preset | frames | render fps | × real time | fps over 1 s windows: median / worst 1 % | render stage median / P99 (ms) | stylize stage median / P99 (ms) | analysis (s) | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["stage_ms"]
        lines.append(
            f"| {r['preset']} | {r['frames']} | {r['fps']:.1f} | {r['fps'] / args.fps:.2f} | "
            f"{r['window_fps'][0]:.1f} / {r['window_fps'][1]:.1f} | "
            f"{s['render'][0]:.1f} / {s['render'][1]:.1f} | {s['stylize'][0]:.1f} / {s['stylize'][1]:.1f} | "
            f"{r['analysis_s']:.2f} | {r['peak_rss_mib']:.0f} |"
        )
    lines += [
        "",
        "render fps = frames / wall time from the first frame in to the finished file (encoder flushed). "
        "Windowed fps = frames reaching the encoder per second of wall time over each 1-second window of video. "
        "Stage times are per frame inside each stage's own thread; they overlap with each other and with encoding, "
        "so they do not add up. Analysis (decode + lip-sync + motion, before the first frame) is not in the fps.",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(args.out, "render", body)
        print(f"bench render: updated {args.out}", file=sys.stderr)
    slow = [r["preset"] for r in results if r["fps"] < GOAL_FPS]
    if slow:
        print(f"bench render: below the {GOAL_FPS:g} fps goal: {', '.join(slow)}", file=sys.stderr)
    return 0
