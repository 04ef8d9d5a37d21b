"""One preset's render benchmark, run in a fresh process by app/bench.py; prints one JSON line."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from core.stats import median, median_p99, percentile


def percentiles(values: list[float]) -> tuple[float, float]:
    return median_p99(values) if values else (0.0, 0.0)


def main(argv: list[str]) -> int:
    from app.render_job import RenderRequest, build_graph
    from audio.demo_song import demo_song_path

    preset, out, width, height, fps, seconds = argv
    req = RenderRequest(
        audio=demo_song_path(),
        output=Path(out),
        preset=preset,
        width=int(width),
        height=int(height),
        fps=int(fps),
        seconds=float(seconds),
    )
    t0 = time.perf_counter()
    graph, ctx, _ = build_graph(req)
    analysis_s = time.perf_counter() - t0

    arrivals: list[float] = []
    stage_ms: dict[str, list[float]] = {}

    def on_frame(frame) -> None:
        arrivals.append(time.perf_counter())
        for name, ms in frame.timings.items():
            stage_ms.setdefault(name, []).append(ms)

    stats = graph.run(ctx, on_frame=on_frame)
    # Frames reach the encoder in batches, so single intervals say little: take the frame rate
    # over each sliding window of one second of video instead.
    arr = np.asarray(arrivals)
    window = int(fps)
    window_fps = (
        list(window / np.maximum(arr[window:] - arr[:-window], 1e-9))
        if len(arr) > window
        else [stats.fps]
    )
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "preset": preset,
                "frames": stats.frames,
                "fps": stats.fps,
                "window_fps": (median(window_fps), percentile(window_fps, 1)),
                "stage_ms": {k: percentiles(v) for k, v in stage_ms.items()},
                "analysis_s": analysis_s,
                "peak_rss_mib": peak_kib / 1024,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
