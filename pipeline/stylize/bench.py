"""Benchmark StylizeStage on real idol frames (1 torch thread): median and P99 ms/frame per
preset and mode, batches of 4.

PYTHONPATH=. .venv/bin/python -m pipeline.stylize.bench [--frames 40] [--size 1280x720] [preset ...]
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import torch

from core.avatar import AvatarParams
from core.stage import Context
from pipeline.cpu_memory import keep_freed_memory
from pipeline.stylize import StylizeStage
from presets.loader import load_preset
from render.idol import IdolRenderer

BUILTINS = ("studio", "ink-wash", "cyberpunk")


def idol_frames(preset, w: int, h: int, n: int) -> torch.Tensor:
    """n premultiplied frames of the idol with head/body motion and singing."""
    r = IdolRenderer(w, h, preset.palette, preset.line)
    out = []
    for i in range(n):
        t = i / 30
        ap = AvatarParams(
            pts_ns=int(t * 1e9),
            head_yaw=25 * math.sin(t * 2.1),
            head_pitch=12 * math.sin(t * 3.3),
            head_roll=20 * math.sin(t * 1.7),
            body_yaw=9 * math.sin(t * 1.3),
            body_roll=8 * math.sin(t * 2.7),
            mouth_open=0.5 + 0.5 * math.sin(t * 9),
            breath=0.5 + 0.5 * math.sin(t * 4),
            cheek=0.5,
        )
        out.append(torch.from_numpy(r.render(ap).rgba.copy()))
    return torch.stack(out)


def main(argv: list[str]) -> None:
    keep_freed_memory()
    torch.set_num_threads(1)
    w, h, n = 1280, 720, 40
    if "--size" in argv:
        w, h = (int(v) for v in argv[argv.index("--size") + 1].split("x"))
    if "--frames" in argv:
        n = int(argv[argv.index("--frames") + 1])
    names = [a for a in argv if a in BUILTINS] or list(BUILTINS)
    for name in names:
        preset = load_preset(name)
        x = idol_frames(preset, w, h, n)
        for tr in (False, True):
            st = StylizeStage(preset, w, h, transparent=tr)
            t = time.perf_counter()
            st.setup(Context(w, h, 30, 48000))
            setup_s = time.perf_counter() - t
            ts = []
            for i in range(0, n - 3, 4):
                t = time.perf_counter()
                st.apply(x[i : i + 4], torch.arange(i, i + 4))
                ts.append((time.perf_counter() - t) * 1000 / 4)
            ts.sort()
            p99 = ts[min(len(ts) - 1, math.ceil(0.99 * len(ts)) - 1)]
            print(
                f"{name:10s} transparent={tr!s:5s}: median {statistics.median(ts):6.2f} "
                f"P99 {p99:6.2f} ms/frame (setup {setup_s:.2f}s, {w}x{h}, 1 thread)",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
