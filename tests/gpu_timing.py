"""CUDA-event timing shared by the GPU tests (imported only where CUDA is available)."""

from __future__ import annotations

from core.stats import median
from pipeline.accel.timing import cuda_times


def cuda_median_ms(fn, runs: int = 40, warmup: int = 5) -> float:
    """Median GPU time of `fn` in ms, from CUDA events around each call."""
    return median(cuda_times(fn, runs, warmup))
