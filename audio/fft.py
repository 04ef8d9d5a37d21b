"""Real FFTs of many frames at once (the offline analysis: a whole song's hops), on every core.

numpy's FFT runs on one core, and the analysis of a song is mostly FFTs of its frames, which a
render's first frame waits for. scipy.fft is the same pocketfft with a `workers` argument that
splits the rows over threads; on float64 it gives numpy's numbers exactly, on float32 the same
to float32's precision (and faster than numpy's float32 path even on one core). Small
transforms (a live hop, a short buffer) stay on numpy: threads would cost more than they save.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["irfft", "rfft"]

# below this many input values one core is quicker than starting the others
_PARALLEL_FROM = 1 << 16
_WORKERS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def rfft(x: np.ndarray, n: int | None = None, axis: int = -1) -> np.ndarray:
    """`np.fft.rfft(x, n, axis)`, the rows of a large `x` spread over the cores."""
    if x.size < _PARALLEL_FROM:
        return np.fft.rfft(x, n, axis=axis)
    import scipy.fft

    return scipy.fft.rfft(x, n, axis=axis, workers=_WORKERS)


def irfft(spec: np.ndarray, n: int | None = None, axis: int = -1) -> np.ndarray:
    """`np.fft.irfft(spec, n, axis)`, the rows of a large `spec` spread over the cores."""
    if spec.size < _PARALLEL_FROM:
        return np.fft.irfft(spec, n, axis=axis)
    import scipy.fft

    return scipy.fft.irfft(spec, n, axis=axis, workers=_WORKERS)
