"""GPU time of a call, from CUDA events (never synchronize() inside the timed loop).

cuda_times(fn, n, warmup=10) -> list[float]    ms per call of fn(), n calls
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def cuda_times(fn: Callable[[], object], n: int, warmup: int = 10) -> list[float]:
    """Records an event pair around each of n calls on the current stream and reads them all
    once after the loop, so the timed calls queue back to back as they would in use."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        events.append((a, b))
    torch.cuda.synchronize()  # once, after the timed loop
    return [a.elapsed_time(b) for a, b in events]
