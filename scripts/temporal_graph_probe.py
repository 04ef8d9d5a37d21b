"""Would a CUDA graph take the temporal stage's launch cost off the live frame thread?

    python3 scripts/temporal_graph_probe.py [--size 640x360] [--frames 300] [--presets ...]

On the H200's live traces (docs/BENCHMARKS.md, "Where a frame's time goes") issuing the eager
temporal stage takes the frame thread about 2 ms a frame, several times what the GPU spends on
it. This probe captures the stage's blend (`TemporalStage._blend`, the three inputs packed into
one tensor for `pipeline.accel.GraphCache`, which checks the replay against eager) with each
preset's weights, then times the host side of issuing one frame — eager against copy-in +
replay — and the GPU time of both (CUDA events), on a clip of the built-in idol with its motion
vectors; the outputs of the two paths are compared frame by frame. A probe for the next step,
not the product: the stage itself is unchanged.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from app.config import parse_size
from pipeline.accel.graphs import GraphCache
from pipeline.temporal.measure import render_clip
from pipeline.temporal.stage import TemporalStage, _to_float
from presets.loader import load_preset


def packed_blend(stage: TemporalStage):
    """fn(x) for GraphCache: x = cat(current (4), history (4), motion (2)) on the channels."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        motion = x[:, 8:10].permute(0, 2, 3, 1)
        return stage._blend(x[:, 0:4], x[:, 4:8], motion)

    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=parse_size, default="640x360")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--presets", default="studio,cyberpunk,ink-wash")
    a = ap.parse_args()
    w, h = a.size
    dev = torch.device("cuda")
    images, motions = render_clip(min(a.frames, 120), w, h)
    images, motions = images.to(dev), motions.to(dev)
    n = a.frames
    for name in a.presets.split(","):
        stage = TemporalStage.for_preset(load_preset(name), device="cuda")
        cache = GraphCache(packed_blend(stage), dev, name=f"temporal {name}", atol=2e-3)
        first = _to_float(images[0], dev)
        pack = torch.cat([first, first, motions[1].permute(2, 0, 1)[None]], dim=1)
        t0 = time.perf_counter()
        cache.capture(pack)
        capture_s = time.perf_counter() - t0
        host = {"eager": [], "graph": []}
        gpu = {"eager": [], "graph": []}
        worst = 0.0
        with torch.inference_mode():
            hist_e = hist_g = first
            for i in range(1, n):
                j = i % images.shape[0] or 1
                cur = _to_float(images[j], dev)
                mot = motions[j]
                for path in ("eager", "graph"):
                    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    start.record()
                    if path == "eager":
                        hist_e = stage._blend(cur, hist_e, mot)
                    else:
                        x = torch.cat([cur, hist_g, mot.permute(2, 0, 1)[None]], dim=1)
                        hist_g = cache(x)
                    end.record()
                    host[path].append((time.perf_counter() - t) * 1000)
                    end.synchronize()
                    gpu[path].append(start.elapsed_time(end))
                worst = max(worst, float((hist_e - hist_g).abs().max()) * 255)
        for path in ("eager", "graph"):
            hv, gv = np.array(host[path]), np.array(gpu[path])
            print(
                f"{name} {path}: host {np.median(hv):.3f} / {np.percentile(hv, 99):.3f} ms, "
                f"GPU {np.median(gv):.3f} / {np.percentile(gv, 99):.3f} ms (median / P99, "
                f"{len(hv)} frames)"
            )
        print(
            f"{name}: capture {capture_s:.2f} s; largest eager/graph difference {worst:.3f} levels"
        )


if __name__ == "__main__":
    main()
