"""Benchmark: median ms/frame of StylizeStage per preset, batches of 4.

PYTHONPATH=. .venv/bin/python -m pipeline.stylize.bench [--compile] [--size 1280x720] [preset ...]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from pipeline.stage import Context
from pipeline.stylize import StylizeStage
from presets.loader import load_preset


def synth(w=1280, h=720, shift=0):
    """A disc with an outline, a red patch, a bright highlight; premultiplied."""
    y, x = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    cx, cy, r = w / 2 + shift, h / 2, h * 0.35
    d = ((x - cx) ** 2 + (y - cy) ** 2).sqrt()
    a = (r - d + 0.5).clamp(0, 1)
    col = torch.zeros(h, w, 3)
    col[:] = torch.tensor([1.0, 0.89, 0.84])
    col[y < cy - r * 0.3] = torch.tensor([0.5, 0.71, 1.0])  # hair
    red = ((x - (cx + r * 0.35)) ** 2 + (y - (cy + r * 0.2)) ** 2).sqrt() < r * 0.18
    col[red] = torch.tensor([0.85, 0.22, 0.12])
    hi = ((x - (cx - r * 0.4)) ** 2 + (y - (cy - r * 0.5)) ** 2).sqrt() < r * 0.1
    col[hi] = torch.tensor([1.0, 1.0, 1.0])
    line = ((d - (r - 2)).abs() < 1.5) | ((y - (cy + r * 0.5)).abs() < 1.5) & (d < r)
    col[line] = torch.tensor([0.23, 0.16, 0.25])
    rgba = torch.cat([col * a[..., None], a[..., None]], -1)
    return (rgba * 255 + 0.5).to(torch.uint8)


def main(argv: list[str]) -> None:
    compile_ = "--compile" in argv
    w, h = 1280, 720
    if "--size" in argv:
        w, h = (int(v) for v in argv[argv.index("--size") + 1].split("x"))
    names = [a for a in argv if (not a.startswith("--") and "x" not in a) or a in {"ink-wash"}]
    names = [n for n in names if n in {"studio", "ink-wash", "cyberpunk"}] or [
        "studio",
        "ink-wash",
        "cyberpunk",
    ]
    x = torch.stack([synth(w, h, shift=i) for i in range(4)])
    for n in names:
        for tr in (False, True):
            st = StylizeStage(load_preset(n), w, h, transparent=tr, compile=compile_)
            t = time.perf_counter()
            st.setup(Context(w, h, 30, 48000))
            setup_s = time.perf_counter() - t
            ts = []
            for i in range(12):
                t = time.perf_counter()
                st.apply(x, torch.arange(4) + 4 * i)
                ts.append((time.perf_counter() - t) * 1000 / 4)
            print(
                f"{n:10s} transparent={tr!s:5s} compile={compile_}: median "
                f"{statistics.median(ts):6.2f} ms/frame (min {min(ts):.2f}, setup {setup_s:.1f}s)",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
