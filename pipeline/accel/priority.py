"""The high-priority CUDA stream (thread priority: core.priority, re-exported here).

high_priority_stream(device) -> torch.cuda.Stream with the highest priority the device
    offers (CUDA's "greatest" priority is the numerically lowest value).
"""

from __future__ import annotations

import torch

from core.priority import request_realtime_priority

__all__ = ["high_priority_stream", "request_realtime_priority"]


def high_priority_stream(device: torch.device | str | int | None = None) -> torch.cuda.Stream:
    """A new CUDA stream on `device` with the device's highest priority."""
    if not torch.cuda.is_available():
        raise RuntimeError("high_priority_stream: CUDA is not available")
    return torch.cuda.Stream(device=device, priority=-(1 << 20))
