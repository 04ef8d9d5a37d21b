"""CUDA-event timing shared by the GPU tests (imported only where CUDA is available)."""

from __future__ import annotations

import statistics

import torch


def cuda_median_ms(fn, runs: int = 40, warmup: int = 5) -> float:
    """Median wall time of `fn` on the GPU in ms, from CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
