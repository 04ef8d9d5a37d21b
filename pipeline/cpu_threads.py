"""How many threads torch, and the song analysis's BLAS, may use on the CPU beside other work."""

from __future__ import annotations

import os


def share_cores_with_other_stages() -> int:
    """Give torch half the cores: the idol renderer, the encoder (offline) or the analysis and
    UI threads (live) run beside it. Returns the thread count set.

    Measured on the 2-core machine (docs/BENCHMARKS.md): offline ink-wash 32.1 fps with 1
    torch thread vs 28.8 with 2, cyberpunk 30.9 vs 26.9 — intra-op threads only fought the
    other stages for the same cores. Live, a preset switch builds the next look on a helper
    thread; with both cores to torch that build starved the frame producer.
    """
    import torch

    threads = max(1, (os.cpu_count() or 2) // 2)
    torch.set_num_threads(threads)
    return threads


def analysis_blas_env() -> dict[str, str]:
    """The environment a process that analyses songs starts numpy with: its BLAS on a quarter
    of the cores. The chunks, the features and the nets call it from many threads at once, and
    each call spreading over every core made the analysis slower than on a few (or on one;
    docs/BENCHMARKS.md). Read when numpy loads: a process's own setting wins."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return {}
    return {"OPENBLAS_NUM_THREADS": str(max(1, _cores() // 4))}


def _cores() -> int:
    # core.workers.usable_cores, which cannot be called here: its module loads numpy, and
    # this is read before numpy loads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
