"""Real FFTs of many frames at once (the offline analysis: a whole song's hops), on every core.

numpy's FFT runs on one core, and the analysis of a song is mostly FFTs of its frames, which a
render's first frame waits for. scipy.fft is the same pocketfft with a `workers` argument that
splits the rows over threads; on float64 it gives numpy's numbers exactly, on float32 the same
to float32's precision (and faster than numpy's float32 path even on one core). Small
transforms (a live hop, a short buffer) stay on numpy: threads would cost more than they save.
"""

from __future__ import annotations

import importlib
import os
import threading
from types import ModuleType

import numpy as np

__all__ = ["CORES", "irfft", "one_core", "rfft", "scipy_part"]

# below this many input values one core is quicker than starting the others
_PARALLEL_FROM = 1 << 16
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_SCIPY_IMPORT = threading.Lock()
_HERE = threading.local()  # `one_core`'s mark, per thread


class one_core:
    """Within it, this thread's transforms use one core (the work already runs on many
    threads: `audio.time_chunks`' chunks, each spreading its rows again, asked for
    cores × cores threads)."""

    def __enter__(self) -> None:
        self._before = getattr(_HERE, "one", False)
        _HERE.one = True

    def __exit__(self, *exc) -> None:
        _HERE.one = self._before


def _workers() -> int:
    return 1 if getattr(_HERE, "one", False) else CORES


def scipy_part(name: str) -> ModuleType:
    """`scipy.<name>`, imported under one lock. The analysis's threads import scipy's parts on
    first use, and two threads importing them at once can meet scipy half-initialised (Python
    breaks the module locks' cycle that way): "cannot import name … from partially initialized
    module" in a render's analysis."""
    with _SCIPY_IMPORT:
        return importlib.import_module(f"scipy.{name}")


def rfft(x: np.ndarray, n: int | None = None, axis: int = -1) -> np.ndarray:
    """`np.fft.rfft(x, n, axis)`, the rows of a large `x` spread over the cores."""
    if x.size < _PARALLEL_FROM:
        return np.fft.rfft(x, n, axis=axis)
    return scipy_part("fft").rfft(x, n, axis=axis, workers=_workers())


def irfft(spec: np.ndarray, n: int | None = None, axis: int = -1) -> np.ndarray:
    """`np.fft.irfft(spec, n, axis)`, the rows of a large `spec` spread over the cores."""
    if spec.size < _PARALLEL_FROM:
        return np.fft.irfft(spec, n, axis=axis)
    return scipy_part("fft").irfft(spec, n, axis=axis, workers=_workers())
