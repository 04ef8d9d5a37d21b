"""How many threads torch may use on the CPU when other stages run beside it."""

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
