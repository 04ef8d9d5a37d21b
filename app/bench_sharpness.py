"""`kagura bench sharpness` — does Kagura's model keep the fast look's detail? The check anyone
can run on a CPU, through the real command.

    kagura bench sharpness [--device cpu|cuda] [--seconds 0.3] [--size 640x360]
                           [--presets studio ink-wash cyberpunk] [--out docs/BENCHMARKS.md]

For every preset, `kagura render` runs twice as a subprocess on the demo song — with
`--diffusion kagura` and with `--no-diffusion`, no upscale, the temporal stage at its default —
and the two MP4s are decoded with av. Sharpness is the Laplacian RMS of the luminance
(`pipeline.temporal.laplacian_rms`), averaged over the frames; the ratio model / fast look is
the figure, and the goal is >= 0.8 for every preset. Both files go through the same encoder
settings, so the compression's softening is in both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from app.errors import UsageError

GOAL = 0.8
PRESETS = ("studio", "ink-wash", "cyberpunk")


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "sharpness", help="Laplacian RMS of renders with and without Kagura's model, per preset"
    )
    b.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    b.add_argument("--seconds", type=float, default=0.3)
    b.add_argument("--size", default="640x360")
    b.add_argument("--presets", nargs="+", default=list(PRESETS))
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    return b


def _render(audio: Path, out: Path, args, preset: str, model: bool) -> None:
    cmd = [sys.executable, "-m", "app.cli", "render", str(audio), "-o", str(out), "-y"]
    cmd += ["--seconds", f"{args.seconds:g}", "--size", args.size, "--preset", preset]
    cmd += ["--device", args.device, "--upscale", "1"]
    cmd += ["--diffusion", "kagura"] if model else ["--no-diffusion"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"bench sharpness: `{' '.join(cmd[2:])}` failed: {tail}")


def _frames(path: Path):
    import av
    import numpy as np
    import torch

    with av.open(str(path)) as box:
        pics = [f.to_ndarray(format="rgb24") for f in box.decode(video=0)]
    return torch.from_numpy(np.stack(pics))


def run(args: argparse.Namespace) -> int:
    from audio.demo_song import demo_song_path
    from core.benchdoc import machine_line, today, write_section
    from pipeline.temporal.stage import laplacian_rms
    from presets.loader import load_preset

    if not 0.05 <= args.seconds <= 60:
        raise UsageError(f"--seconds {args.seconds}: expected 0.05 to 60")
    for name in args.presets:
        load_preset(name)  # a wrong name: one line, before anything renders
    audio = demo_song_path()
    rows, ratios = [], {}
    with tempfile.TemporaryDirectory(prefix="kagura-sharp-") as tmp:
        for name in args.presets:
            vals = {}
            for model in (True, False):
                out = Path(tmp) / f"{name}-{'model' if model else 'fast'}.mp4"
                _render(audio, out, args, name, model)
                vals[model] = laplacian_rms(_frames(out))
            ratios[name] = vals[True] / max(vals[False], 1e-9)
            verdict = "meets" if ratios[name] >= GOAL else "MISSES"
            rows.append(
                f"| {name} | {vals[False]:.2f} | {vals[True]:.2f} | {ratios[name]:.2f} — "
                f"{verdict} the {GOAL} goal |"
            )
            print(rows[-1], flush=True)
    cmd = (
        f"kagura bench sharpness --device {args.device} --seconds {args.seconds:g} "
        f"--size {args.size}"
    )
    body = "\n".join(
        [
            f"## Sharpness of the real render: Kagura's model against the fast look, {args.device}",
            "",
            f"- date: {today()}",
            f"- machine: {machine_line()}",
            f"- command: `{cmd}`",
            f"- each row: `kagura render` of the demo song's first {args.seconds:g} s at "
            f"{args.size}, no upscale, `--diffusion kagura` and `--no-diffusion`, decoded with av",
            "",
            "| preset | fast look Laplacian RMS | model Laplacian RMS | model / fast |",
            "|---|---|---|---|",
            *rows,
        ]
    )
    write_section(args.out, f"sharpness-{args.device}", body)
    print(f"bench sharpness: updated {args.out}")
    return 0 if all(r >= GOAL for r in ratios.values()) else 1
